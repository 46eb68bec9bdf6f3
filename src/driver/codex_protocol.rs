//! What the Codex CLI (0.171.x) says and owl reads: `codex exec --json` events, its rollout file's utilization, its usage-limit words. The first piece of a codex Driver (issue 14), unit-tested on the recorded transcripts; not yet wired to a Driver.

use chrono::{DateTime, Local, NaiveDate, NaiveTime, TimeZone, Utc};
use serde_json::Value;

use super::{AgentEvent, AgentFailure, AgentResult, LineError, WindowUsage};

/// One `codex exec --json` line as an event.
pub fn parse_line(line: &[u8]) -> Result<AgentEvent, LineError> {
    let v: Value = serde_json::from_slice(line).map_err(|e| LineError::NotJson(e.to_string()))?;
    let item = &v["item"];
    Ok(match v["type"].as_str().unwrap_or("") {
        "thread.started" => AgentEvent::Init {
            session_id: v["thread_id"].as_str().map(String::from),
            model: None,
            version: None,
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

/// The utilization in one rollout line: a `token_count` event's `rate_limits`, `primary`
/// as `five_hour` and `secondary` as `seven_day` (empty when the line has none).
pub fn rollout_usage(line: &Value) -> Vec<WindowUsage> {
    let payload = &line["payload"];
    if line["type"] != "event_msg" || payload["type"] != "token_count" {
        return Vec::new();
    }
    let limits = &payload["rate_limits"];
    [("primary", "five_hour"), ("secondary", "seven_day")]
        .into_iter()
        .filter_map(|(key, window)| {
            let w = &limits[key];
            Some(WindowUsage {
                window: window.to_string(),
                percent: w["used_percent"].as_f64()?,
                resets_at: w["resets_at"]
                    .as_i64()
                    .and_then(|s| DateTime::from_timestamp(s, 0)),
            })
        })
        .collect()
}

/// What a failed turn means beyond the Job: a usage limit (never retried by the CLI) or
/// the API failing after its retries.
pub fn failure(r: &AgentResult) -> Option<AgentFailure> {
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
pub fn named_reset(text: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
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
