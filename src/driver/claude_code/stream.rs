//! Claude Code's stream-json lines read into events: a fast path for the common lines, the general parse, usage answers, rate limits, results and denials.

use super::*;

/// The lines that make up nearly all of a stream (the model's turns and the tools'
/// results), read into only the fields owl uses, borrowing from the line: everything else
/// is skipped without being built. Any other shape goes the general way.
#[derive(serde::Deserialize)]
pub(super) struct FastLine<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    message: Option<FastMessage<'a>>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(serde::Deserialize)]
pub(super) struct FastMessage<'a> {
    #[serde(default, borrow)]
    model: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    content: Vec<FastBlock<'a>>,
}

#[derive(serde::Deserialize)]
pub(super) struct FastBlock<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    text: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    name: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    is_error: Option<bool>,
}

/// The fast way for `assistant` and `user` lines; `None` sends the line the general way.
pub(super) fn parse_fast(text: &str) -> Option<AgentEvent> {
    let line: FastLine = serde_json::from_str(text).ok()?;
    // A line with no message reads as an empty one, as the general way reads it: a huge
    // unknown field is skipped here, never built into a value.
    let message = line.message.unwrap_or(FastMessage {
        model: None,
        content: Vec::new(),
    });
    match line.kind.as_ref() {
        "assistant" => {
            let parts: Vec<String> = message
                .content
                .iter()
                .map(|b| match b.kind.as_ref() {
                    "text" => format!(
                        "\"{}\"",
                        truncate(b.text.as_deref().unwrap_or("").trim(), 60)
                    ),
                    "tool_use" => format!("tool {}", b.name.as_deref().unwrap_or("?")),
                    other => other.to_string(),
                })
                .collect();
            Some(AgentEvent::Assistant {
                summary: if parts.is_empty() {
                    "message".into()
                } else {
                    parts.join(", ")
                },
                synthetic: message.model.as_deref() == Some("<synthetic>"),
                error: line.error,
            })
        }
        "user"
            if message.content.iter().any(|b| {
                b.kind == "text" && b.text.as_deref().is_some_and(is_interrupt_marker)
            }) =>
        {
            Some(AgentEvent::Interrupted)
        }
        "user" => Some(AgentEvent::ToolResult {
            is_error: message
                .content
                .iter()
                .any(|b| b.kind == "tool_result" && b.is_error == Some(true)),
            // Claude Code lists its denials on the result line.
            denied: None,
        }),
        _ => None,
    }
}

pub(super) fn parse_line(line: &[u8]) -> Result<AgentEvent, LineError> {
    let text = std::str::from_utf8(line).map_err(|_| LineError::NotUtf8)?;
    match parse_fast(text) {
        Some(event) => Ok(event),
        None => parse_general(text),
    }
}

/// What the init line says the CLI took from somewhere owl did not configure. owl gives a
/// Run no key helper, no MCP server and no plugin beyond the CLI's built-in ones
/// (`--setting-sources=`, `--strict-mcp-config`): any of them came from a file the agent
/// could write. `apiKeySource` is `none` on a plan login and names the variable on a key
/// the Account's `env` sets; only a helper comes from a settings file.
fn unconfigured_at_init(v: &Value) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(source @ "apiKeyHelper") = str_at(v, "apiKeySource") {
        found.push(format!(
            "a key from {source} in place of the Account's login"
        ));
    }
    for server in v["mcp_servers"].as_array().into_iter().flatten() {
        found.push(format!(
            "an MCP server '{}' (from {})",
            str_at(server, "name").unwrap_or("unnamed"),
            str_at(server, "source").unwrap_or("an unnamed source"),
        ));
    }
    for plugin in v["plugins"].as_array().into_iter().flatten() {
        let source = str_at(plugin, "source").unwrap_or("");
        if !source.ends_with("@builtin") {
            found.push(format!(
                "a plugin '{}' (from {})",
                str_at(plugin, "name").unwrap_or("unnamed"),
                str_at(plugin, "path").unwrap_or("an unnamed place"),
            ));
        }
    }
    found
}

/// Any line, through a `serde_json::Value`.
pub(super) fn parse_general(text: &str) -> Result<AgentEvent, LineError> {
    let v: Value = serde_json::from_str(text).map_err(|e| LineError::NotJson(e.to_string()))?;
    let kind = v
        .get("type")
        .and_then(Value::as_str)
        .ok_or(LineError::NoType)?;
    Ok(match (kind, str_at(&v, "subtype")) {
        ("system", Some("init")) => AgentEvent::Init {
            session_id: string_at(&v, "session_id"),
            model: string_at(&v, "model"),
            version: string_at(&v, "claude_code_version"),
            unconfigured: unconfigured_at_init(&v),
        },
        ("system", Some("hook_started")) => AgentEvent::Unconfigured(format!(
            "a hook ran on {} ({})",
            str_at(&v, "hook_event").unwrap_or("an unnamed event"),
            str_at(&v, "hook_name").unwrap_or("unnamed"),
        )),
        ("system", Some("api_retry")) => AgentEvent::ApiRetry {
            attempt: v.get("attempt").and_then(Value::as_i64).unwrap_or(0),
            max_retries: v.get("max_retries").and_then(Value::as_i64).unwrap_or(0),
            error_status: v.get("error_status").and_then(Value::as_i64),
        },
        ("assistant", _) => AgentEvent::Assistant {
            summary: summarize_assistant(&v),
            // The CLI's own stand-in for a model answer it could not get.
            synthetic: v.pointer("/message/model").and_then(Value::as_str) == Some("<synthetic>"),
            error: string_at(&v, "error"),
        },
        ("user", _)
            if content_blocks(&v).any(|b| {
                str_at(b, "type") == Some("text")
                    && str_at(b, "text").is_some_and(is_interrupt_marker)
            }) =>
        {
            AgentEvent::Interrupted
        }
        ("user", _) => AgentEvent::ToolResult {
            is_error: content_blocks(&v).any(|b| {
                b.get("type").and_then(Value::as_str) == Some("tool_result")
                    && b.get("is_error").and_then(Value::as_bool) == Some(true)
            }),
            denied: None,
        },
        ("rate_limit_event", _) => AgentEvent::RateLimit(parse_rate_limit(&v)),
        ("control_response", _) => {
            let resp = v.get("response").unwrap_or(&Value::Null);
            AgentEvent::ControlResponse {
                request_id: string_at(resp, "request_id").unwrap_or_default(),
                ok: str_at(resp, "subtype") == Some("success"),
                usage: resp.get("response").and_then(parse_usage),
                cost_usd: resp
                    .pointer("/response/session/total_cost_usd")
                    .and_then(Value::as_f64),
            }
        }
        ("result", _) => AgentEvent::Result(parse_result(&v)),
        (other, _) => AgentEvent::Other {
            kind: other.chars().take(64).collect(),
        },
    })
}

/// Reads a `get_usage` answer: percent 0–100 and ISO 8601 times per Window; `null` means
/// the CLI does not know yet. Entries without a numeric utilization (`extra_usage`, a
/// `null` Window) are not Windows. `model_scoped` rows are the per-model weekly Windows
/// (2.1.332 §2.2): the first is the stream's `seven_day_overage_included`, with its
/// model's name, which the stream never says.
pub(super) fn parse_usage(response: &Value) -> Option<Usage> {
    let limits = response.get("rate_limits")?;
    // With no login (or only an API key) the CLI answers `subscription_type: null,
    // rate_limits_available: false` (not-logged-in.jsonl); a plan login says its plan.
    let no_plan = response
        .get("subscription_type")
        .is_some_and(Value::is_null)
        && response.get("rate_limits_available") == Some(&Value::Bool(false));
    if no_plan {
        return Some(Usage::NoPlan);
    }
    let Some(map) = limits.as_object() else {
        return Some(Usage::Unknown);
    };
    let mut windows: Vec<WindowUsage> = map
        .iter()
        .filter_map(|(name, w)| {
            Some(WindowUsage {
                window: name.chars().take(64).collect(),
                percent: w.get("utilization")?.as_f64()?,
                resets_at: iso_time(w.get("resets_at")),
                model: None,
            })
        })
        .collect();
    let scoped = map.get("model_scoped").and_then(Value::as_array);
    for (i, row) in scoped.into_iter().flatten().enumerate() {
        let Some(percent) = row.get("utilization").and_then(Value::as_f64) else {
            continue;
        };
        let model = str_at(row, "display_name").map(|m| m.chars().take(64).collect::<String>());
        let window = match (i, &model) {
            (0, _) | (_, None) => MODEL_WEEKLY.to_string(),
            (_, Some(m)) => format!("{MODEL_WEEKLY}:{m}"),
        };
        windows.push(WindowUsage {
            window,
            percent,
            resets_at: iso_time(row.get("resets_at")),
            model,
        });
    }
    Some(Usage::Windows(windows))
}

/// The per-model weekly Window as the stream names it (the header claim `7d_oi`).
pub(super) const MODEL_WEEKLY: &str = "seven_day_overage_included";

pub(super) fn iso_time(v: Option<&Value>) -> Option<chrono::DateTime<chrono::Utc>> {
    v.and_then(Value::as_str)
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&chrono::Utc))
}

pub(super) fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// `5` for 5.0, `0.25` for 0.25: what the CLI's `--max-budget-usd` accepts.
pub(super) fn format_usd(x: f64) -> String {
    format!("{x}")
}

pub(super) fn line_bytes(v: &Value) -> Vec<u8> {
    let mut bytes = v.to_string().into_bytes();
    bytes.push(b'\n');
    bytes
}

pub(super) fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

pub(super) fn string_at(v: &Value, key: &str) -> Option<String> {
    str_at(v, key).map(String::from)
}

/// The CLI's own line for a turn cut short: `[Request interrupted by user]` (or `… for tool
/// use]`), written as the user's message when owl interrupts it.
fn is_interrupt_marker(text: &str) -> bool {
    text.starts_with("[Request interrupted by user")
}

pub(super) fn content_blocks(v: &Value) -> impl Iterator<Item = &Value> {
    v.pointer("/message/content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

pub(super) fn summarize_assistant(v: &Value) -> String {
    let parts: Vec<String> = content_blocks(v)
        .map(|b| match str_at(b, "type") {
            Some("text") => {
                let text = str_at(b, "text").unwrap_or("");
                format!("\"{}\"", truncate(text.trim(), 60))
            }
            Some("tool_use") => format!("tool {}", str_at(b, "name").unwrap_or("?")),
            Some(other) => other.to_string(),
            None => "?".into(),
        })
        .collect();
    if parts.is_empty() {
        "message".into()
    } else {
        parts.join(", ")
    }
}

pub(super) fn parse_rate_limit(v: &Value) -> RateLimitInfo {
    let info = v.get("rate_limit_info").unwrap_or(&Value::Null);
    let flag = |key: &str| info.get(key).and_then(Value::as_bool) == Some(true);
    RateLimitInfo {
        status: string_at(info, "status")
            .map_or(RateLimitStatus::Allowed, |w| RateLimitStatus::parse(&w)),
        resets_at: info
            .get("resetsAt")
            .and_then(Value::as_f64)
            .map(|x| x as i64),
        window: string_at(info, "rateLimitType"),
        utilization: info.get("utilization").and_then(Value::as_f64),
        windows: unified_windows(info.get("unifiedWindows")),
        on_credits: flag("isUsingOverage") || flag("overageInUse"),
    }
}

/// `unifiedWindows` (2.1.332 §1): each Window's `utilization` (a fraction, may pass 1,
/// may be the integer 1) and `resetsAt` (epoch seconds).
pub(super) fn unified_windows(v: Option<&Value>) -> Vec<WindowUsage> {
    let Some(map) = v.and_then(Value::as_object) else {
        return Vec::new();
    };
    map.iter()
        .filter_map(|(name, w)| {
            Some(WindowUsage {
                window: name.chars().take(64).collect(),
                percent: w.get("utilization")?.as_f64()? * 100.0,
                resets_at: w
                    .get("resetsAt")
                    .and_then(Value::as_f64)
                    .and_then(|s| chrono::DateTime::from_timestamp(s as i64, 0)),
                model: None,
            })
        })
        .collect()
}

pub(super) fn parse_result(v: &Value) -> AgentResult {
    let subtype = string_at(v, "subtype").unwrap_or_default();
    // modelUsage is per model and complete; usage can read 0 on an early stop (max-budget).
    let model_usage = v.get("modelUsage").and_then(Value::as_object);
    let sum = |key: &str| -> Option<i64> {
        model_usage.map(|m| m.values().filter_map(|u| u.get(key)?.as_i64()).sum())
    };
    let input_tokens = sum("inputTokens").or_else(|| v.pointer("/usage/input_tokens")?.as_i64());
    let output_tokens = sum("outputTokens").or_else(|| v.pointer("/usage/output_tokens")?.as_i64());
    AgentResult {
        budget_exhausted: subtype == "error_max_budget_usd",
        is_error: v.get("is_error").and_then(Value::as_bool).unwrap_or(false),
        api_error_status: v.get("api_error_status").and_then(Value::as_i64),
        text: string_at(v, "result"),
        errors: v
            .get("errors")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|e| e.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
        terminal_reason: string_at(v, "terminal_reason"),
        api_error: string_at(v, "api_error"),
        session_id: string_at(v, "session_id"),
        cost_usd: v.get("total_cost_usd").and_then(Value::as_f64),
        num_turns: v.get("num_turns").and_then(Value::as_i64),
        input_tokens,
        output_tokens,
        permission_denials: v
            .get("permission_denials")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(parse_denial).collect())
            .unwrap_or_default(),
        subtype,
    }
}

pub(super) fn parse_denial(d: &Value) -> PermissionDenial {
    let input = d.get("tool_input").unwrap_or(&Value::Null);
    let detail = ["command", "file_path", "path", "pattern", "url"]
        .iter()
        .find_map(|k| str_at(input, k))
        .map(|s| truncate(s, 200))
        .unwrap_or_default();
    PermissionDenial {
        tool_name: string_at(d, "tool_name").unwrap_or_else(|| "?".into()),
        detail,
    }
}
