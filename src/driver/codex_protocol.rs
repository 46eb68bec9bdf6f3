//! What the Codex CLI (0.171.x) says and owl reads: `codex exec --json` events, the utilization in its rollout file and from `codex app-server`, its usage-limit words.

use chrono::{DateTime, Local, NaiveDate, NaiveTime, TimeZone, Utc};
use serde_json::{json, Value};

use super::{AgentEvent, AgentFailure, AgentResult, LineError, Usage, WindowUsage};
use crate::model::PermissionDenial;

/// The id of owl's `account/rateLimits/read` request to `codex app-server`.
const RATE_LIMITS_READ: i64 = 2;

/// What the probe writes to `codex app-server`'s stdin: the JSON-RPC handshake, then
/// `account/rateLimits/read`, which a ChatGPT login answers from the backend without a
/// model turn (PROTOCOL.md §5.4).
pub(crate) fn rate_limits_request() -> Vec<u8> {
    let lines = [
        json!({"id": 1, "method": "initialize",
            "params": {"clientInfo": {"name": "owl", "title": "owl", "version": env!("CARGO_PKG_VERSION")}}}),
        json!({"method": "initialized"}),
        json!({"id": RATE_LIMITS_READ, "method": "account/rateLimits/read"}),
    ];
    lines
        .iter()
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        .into_bytes()
}

/// One line of `codex exec --json`, or of `codex app-server` answering the probe, as an event.
pub(crate) fn parse_line(line: &[u8]) -> Result<AgentEvent, LineError> {
    let v: Value = serde_json::from_slice(line).map_err(|e| LineError::NotJson(e.to_string()))?;
    if v.get("type").is_none() && v.get("id").is_some() {
        return Ok(rpc_answer(&v));
    }
    let item = &v["item"];
    Ok(match v["type"].as_str().unwrap_or("") {
        "thread.started" => AgentEvent::Init {
            session_id: v["thread_id"].as_str().map(String::from),
            model: None,
            version: None,
            unconfigured: Vec::new(),
        },
        "item.completed" if item["type"] == "agent_message" => AgentEvent::Assistant {
            summary: crate::text::truncate(item["text"].as_str().unwrap_or(""), 120),
            synthetic: false,
            error: None,
        },
        "item.completed" if item["type"] == "command_execution" => AgentEvent::ToolResult {
            is_error: item["status"] == "failed",
            denied: None,
        },
        "turn.completed" => AgentEvent::Result(AgentResult {
            subtype: "success".into(),
            input_tokens: v["usage"]["input_tokens"].as_i64(),
            output_tokens: v["usage"]["output_tokens"].as_i64(),
            ..Default::default()
        }),
        "turn.failed" => AgentEvent::Result(AgentResult {
            subtype: "error".into(),
            is_error: true,
            text: v["error"]["message"].as_str().map(String::from),
            ..Default::default()
        }),
        // An `error` line is a retry in progress or the failure's first telling; an
        // `item` of type `error` is a warning.
        other => AgentEvent::Other {
            kind: other.to_string(),
        },
    })
}

/// An answer of `codex app-server`: utilization for owl's rate-limits read, or its refusal
/// of an Account without a ChatGPT login (-32600: an API key has no plan).
fn rpc_answer(v: &Value) -> AgentEvent {
    // Told apart by what they say, not by id: an answer to another request is no answer.
    let request_id = v["id"].to_string();
    let limits = &v["result"]["rateLimits"];
    let error = &v["error"];
    let refused = error["code"] == -32600
        && error["message"]
            .as_str()
            .is_some_and(|m| m.contains("rate limits"));
    if refused {
        return AgentEvent::ControlResponse {
            request_id,
            ok: true,
            usage: Some(Usage::NoPlan),
            cost_usd: None,
        };
    }
    if !limits.is_object() {
        return AgentEvent::Other {
            kind: "rpc answer".into(),
        };
    }
    let windows = plan_windows(limits, "usedPercent", "resetsAt");
    AgentEvent::ControlResponse {
        request_id,
        ok: true,
        usage: Some(if windows.is_empty() {
            Usage::Unknown
        } else {
            Usage::Windows(windows)
        }),
        cost_usd: None,
    }
}

/// What one raw rollout line tells that stdout does not: the Account's utilization, or a
/// command the sandbox refused (which leaves no item on stdout, PROTOCOL.md §3).
pub(crate) fn rollout_events(line: &[u8]) -> Vec<AgentEvent> {
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return Vec::new();
    };
    let windows = rollout_usage(&v);
    if !windows.is_empty() {
        return vec![AgentEvent::Usage {
            source: crate::model::SnapshotSource::Rollout,
            windows,
        }];
    }
    sandbox_denial(&v)
        .map(|denied| AgentEvent::ToolResult {
            is_error: true,
            denied: Some(denied),
        })
        .into_iter()
        .collect()
}

/// A tool's output that shows the sandbox refused it: a write the read-only mounts
/// stopped. Its first such line is what `show` lists.
fn sandbox_denial(line: &Value) -> Option<PermissionDenial> {
    let payload = &line["payload"];
    if line["type"] != "response_item" || payload["type"] != "function_call_output" {
        return None;
    }
    let output = payload["output"].as_str()?;
    let refused = output
        .lines()
        .find(|l| l.ends_with(": Read-only file system"))?;
    Some(PermissionDenial {
        tool_name: "exec_command (sandbox)".into(),
        detail: crate::text::truncate(refused, 200),
    })
}

/// The utilization in one rollout line: a `token_count` event's `rate_limits`, `primary`
/// as `five_hour` and `secondary` as `seven_day` (empty when the line has none).
pub(crate) fn rollout_usage(line: &Value) -> Vec<WindowUsage> {
    let payload = &line["payload"];
    if line["type"] != "event_msg" || payload["type"] != "token_count" {
        return Vec::new();
    }
    let limits = &payload["rate_limits"];
    plan_windows(limits, "used_percent", "resets_at")
}

/// Codex's two plan limits as Windows: `primary` is `five_hour`, `secondary` `seven_day`;
/// the rollout and app-server name the same fields in two cases (`used_percent`/`usedPercent`).
fn plan_windows(limits: &Value, percent: &str, reset: &str) -> Vec<WindowUsage> {
    [("primary", "five_hour"), ("secondary", "seven_day")]
        .into_iter()
        .filter_map(|(key, window)| {
            let w = &limits[key];
            Some(WindowUsage {
                window: window.to_string(),
                percent: w[percent].as_f64()?,
                resets_at: w[reset]
                    .as_i64()
                    .and_then(|s| DateTime::from_timestamp(s, 0)),
                model: None,
            })
        })
        .collect()
}

/// What a failed turn means beyond the Job: a usage limit (never retried by the CLI) or
/// the API failing after its retries.
pub(crate) fn failure(r: &AgentResult) -> Option<AgentFailure> {
    let text = r.text.as_deref().unwrap_or("");
    if !r.is_error {
        None
    } else if text.contains("hit your usage limit") {
        Some(AgentFailure::RateLimited)
    } else if text.contains("high demand") || text.contains("exceeded retry limit") {
        Some(AgentFailure::Unavailable)
    } else {
        None
    }
}

/// When a usage limit resets, from the CLI's words: "try again at 4:55 AM." (today, in the
/// machine's local time) or "try again at Dec 4th, 2026 4:59 AM."; `None` without a time.
pub(crate) fn named_reset(text: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let at = text.find("try again at ")? + "try again at ".len();
    let when = text[at..].trim_end().trim_end_matches('.');
    let (date, time) = match when.rsplit_once(", ") {
        Some((date, rest)) => {
            // "Dec 4th, 2026 4:59 AM": the year leads the time.
            let (year, time) = rest.split_once(' ')?;
            let date = date
                .replace("st", "")
                .replace("nd", "")
                .replace("rd", "")
                .replace("th", "");
            let date = NaiveDate::parse_from_str(&format!("{date} {year}"), "%b %d %Y").ok()?;
            (date, time)
        }
        None => (now.with_timezone(&Local).date_naive(), when),
    };
    let time = NaiveTime::parse_from_str(time, "%I:%M %p").ok()?;
    let local = Local.from_local_datetime(&date.and_time(time)).earliest()?;
    Some(local.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(name: &str) -> Vec<Value> {
        crate::driver::recorded_lines("codex-0.171.0", name)
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn result(name: &str) -> AgentResult {
        recorded(name)
            .iter()
            .find_map(|l| match parse_line(l.to_string().as_bytes()) {
                Ok(AgentEvent::Result(r)) => Some(r),
                _ => None,
            })
            .unwrap()
    }

    #[test]
    fn a_recorded_turn_is_read_with_its_thread_and_tokens() {
        let lines = recorded("success.jsonl");
        let init = parse_line(lines[0].to_string().as_bytes()).unwrap();
        assert!(matches!(init, AgentEvent::Init { session_id: Some(ref s), .. } if s.len() == 36));
        let r = result("success.jsonl");
        assert!(!r.is_error);
        assert_eq!((r.input_tokens, r.output_tokens), (Some(1234), Some(56)));
        let commit = recorded("shell-commit-writable-git.jsonl");
        let tools: Vec<bool> = commit
            .iter()
            .filter_map(|l| match parse_line(l.to_string().as_bytes()) {
                Ok(AgentEvent::ToolResult { is_error, .. }) => Some(is_error),
                _ => None,
            })
            .collect();
        assert_eq!(tools, [false], "the commit ran");
    }

    #[test]
    fn a_usage_limit_is_a_rate_limit_and_a_500_an_outage() {
        for name in [
            "usage-limit-429-apikey.jsonl",
            "usage-limit-429-weekly.jsonl",
            "usage-limit-429-no-reset.jsonl",
        ] {
            assert_eq!(
                failure(&result(name)),
                Some(AgentFailure::RateLimited),
                "{name}"
            );
        }
        assert_eq!(
            failure(&result("server-500-default.jsonl")),
            Some(AgentFailure::Unavailable)
        );
        assert_eq!(failure(&result("success.jsonl")), None);
    }

    #[test]
    fn the_rollout_gives_both_windows_newest_last() {
        let usage: Vec<Vec<WindowUsage>> = recorded("rate-limits-apikey.rollout.jsonl")
            .iter()
            .map(rollout_usage)
            .filter(|u| !u.is_empty())
            .collect();
        let first = &usage[0];
        assert_eq!(first[0].window, "five_hour");
        assert_eq!(first[0].percent, 42.5);
        assert_eq!(first[0].resets_at, DateTime::from_timestamp(1796098374, 0));
        assert_eq!(
            (first[1].window.as_str(), first[1].percent),
            ("seven_day", 13.0)
        );
        let last = usage.last().unwrap();
        assert_eq!(last[0].percent, 55.0);
    }

    /// The messages `codex app-server` sent in a recorded session.
    fn app_server_answers(name: &str) -> Vec<AgentEvent> {
        recorded(name)
            .iter()
            .filter(|l| l["dir"] == "recv")
            .map(|l| parse_line(l["msg"].to_string().as_bytes()).unwrap())
            .collect()
    }

    #[test]
    fn app_server_tells_a_chatgpt_logins_windows_and_an_api_key_has_no_plan() {
        let chatgpt = app_server_answers("app-server-chatgpt.jsonrpc.jsonl");
        let usage = chatgpt.iter().find_map(|e| match e {
            AgentEvent::ControlResponse { usage: Some(u), .. } => Some(u.clone()),
            _ => None,
        });
        let Some(Usage::Windows(w)) = usage else {
            panic!("no windows in {chatgpt:?}")
        };
        assert_eq!((w[0].window.as_str(), w[0].percent), ("five_hour", 42.0));
        assert_eq!(w[0].resets_at, DateTime::from_timestamp(1796098519, 0));
        assert_eq!((w[1].window.as_str(), w[1].percent), ("seven_day", 13.0));
        let apikey = app_server_answers("app-server-apikey.jsonrpc.jsonl");
        assert!(apikey.contains(&AgentEvent::ControlResponse {
            request_id: "3".into(),
            ok: true,
            usage: Some(Usage::NoPlan),
            cost_usd: None,
        }));
        let asked: Vec<Value> = String::from_utf8(rate_limits_request())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(asked[2]["method"], "account/rateLimits/read");
        assert_eq!(asked[0]["method"], "initialize");
    }

    #[test]
    fn a_slow_tool_holds_the_figures_back_until_it_finishes() {
        // The rollout is what owl follows: the figures of the response that asked for the
        // tool come only after it, so a poll must cover a long tool call.
        let lines =
            crate::driver::recorded_lines("codex-0.171.0", "rate-limits-slow-tool.rollout.jsonl");
        let usage = |l: &String| {
            rollout_events(l.as_bytes()).into_iter().any(|e| {
                matches!(
                    e,
                    AgentEvent::Usage {
                        source: crate::model::SnapshotSource::Rollout,
                        ..
                    }
                )
            })
        };
        let output = lines
            .iter()
            .position(|l| l.contains("function_call_output"))
            .unwrap();
        let first_figure = lines.iter().position(usage).unwrap();
        assert!(
            first_figure > output,
            "the figure comes after the tool's output"
        );
        assert!(rollout_events(b"not json").is_empty());
    }

    #[test]
    fn a_write_the_sandbox_refused_is_a_denial_though_stdout_shows_nothing() {
        let denied: Vec<PermissionDenial> = [
            "shell-fail-visibility.rollout.jsonl",
            "shell-commit-workspace-write.rollout.jsonl",
        ]
        .iter()
        .flat_map(|name| crate::driver::recorded_lines("codex-0.171.0", name))
        .flat_map(|l| rollout_events(l.as_bytes()))
        .filter_map(|e| match e {
            AgentEvent::ToolResult { denied, .. } => denied,
            _ => None,
        })
        .collect();
        let details: Vec<&str> = denied.iter().map(|d| d.detail.as_str()).collect();
        // A command that merely failed (`false`, in the first recording) is no denial.
        assert_eq!(
            details,
            [
                "touch: cannot touch '/usr/owl-sandbox-probe': Read-only file system",
                "touch: cannot touch '.git/owl-probe': Read-only file system",
                "fatal: Unable to create '/home/dev/src/demo/.git/index.lock': Read-only file system",
            ]
        );
    }

    #[test]
    fn the_reset_is_read_from_the_words_in_local_time() {
        let now = Utc.with_ymd_and_hms(2026, 12, 1, 3, 0, 0).unwrap();
        let today = named_reset("… or try again at 4:55 AM.", now).unwrap();
        assert_eq!(
            today.with_timezone(&Local).format("%H:%M").to_string(),
            "04:55"
        );
        let later = named_reset("… or try again at Dec 4th, 2026 5:13 AM.", now).unwrap();
        assert_eq!(
            later
                .with_timezone(&Local)
                .format("%Y-%m-%d %H:%M")
                .to_string(),
            "2026-12-04 05:13"
        );
        assert_eq!(
            named_reset("You’ve hit your usage limit. Try again later.", now),
            None
        );
    }
}
