//! Claude Code's plan as the CLI tells it: its usage windows in the stream and in get_usage, a limit's rejection and what follows, and auth status.

use super::*;

/// The first version that puts every Window's figure on every `rate_limit_event`: a
/// version from it on that drops them loses what owl stops a Run on.
pub(super) const UNIFIED_WINDOWS_SINCE: (u64, u64, u64) = (2, 1, 332);

/// Whether `version` ("2.1.332") is at least `min`; an unreadable one is held to it.
pub(super) fn at_least(version: Option<&str>, min: (u64, u64, u64)) -> bool {
    let Some(v) = version else {
        return true;
    };
    let mut parts = v.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    let v = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    v >= min
}

/// A check of a fact owl reads from `UNIFIED_WINDOWS_SINCE` on: required there, and on an
/// older version said without failing (owl falls back on `get_usage` polls).
pub(super) fn since(name: &'static str, version: Option<&str>, ok: bool, seen: String) -> Check {
    if ok || at_least(version, UNIFIED_WINDOWS_SINCE) {
        Check::new(name, ok, seen)
    } else {
        Check::new(
            name,
            true,
            format!("absent before 2.1.332, as expected: {seen}"),
        )
    }
}

/// A turn of three responses: every Window's figure on an allowed event, the per-model
/// week in the stream and in `get_usage`, and both signs of extra usage.
pub(super) fn windows(command: &Path, record: Option<&Path>) -> Vec<Check> {
    const FIGURE: &str = "unifiedWindows carries each figure on an allowed event";
    let reset = chrono::Utc::now().timestamp() + 3 * 3600;
    let week = reset + 3 * 86_400;
    let sleep = |secs: &str| {
        Reply::tool(
            "Bash",
            json!({"command": format!("sleep {secs}"), "description": "Wait"}),
        )
    };
    let replies = vec![
        sleep("1")
            .with_five_hour("allowed", 0.42, reset)
            .with_model_week(0.8, week),
        sleep("0")
            .with_five_hour("allowed", 0.5, reset)
            .on_credits(),
        Reply::text("Done.")
            .with_five_hour("rejected", 1.0, reset)
            .unified("overage-status", "allowed")
            .unified("overage-reset", reset + 30 * 86_400),
    ];
    // owl polls at the API's first answer, while the first tool runs.
    let run = scene("windows", replies, true).and_then(|s| {
        let asked = (tools(&["Bash(sleep:*)"]), "Wait a little, then say done.");
        s.run(command, asked, Some(POLL), StopWhen::Never, record)
    });
    let run = match run {
        Ok(run) => run,
        Err(why) => return vec![Check::failed(FIGURE, why)],
    };
    let first = run
        .events
        .iter()
        .find(|e| matches!(e, AgentEvent::RateLimit(_)))
        .cloned();
    let answer = run
        .events
        .iter()
        .find(|e| matches!(e, AgentEvent::ControlResponse { usage: Some(_), .. }))
        .cloned();
    window_checks(first, answer, run.report.result.is_some(), &run.events)
}

/// A Window's figure on an event, rounded as owl stores it.
fn figure(i: &crate::driver::RateLimitInfo, w: &str) -> Option<f64> {
    i.windows
        .iter()
        .find(|x| x.window == w)
        .map(|x| crate::model::round_percent(x.percent))
}

/// The first rate-limit event is allowed and carries the five-hour figure.
fn first_figure(first: Option<&AgentEvent>, version: Option<&str>) -> Check {
    const FIGURE: &str = "unifiedWindows carries each figure on an allowed event";
    match first {
        Some(AgentEvent::RateLimit(i)) => since(
            FIGURE,
            version,
            i.status == RateLimitStatus::Allowed && figure(i, "five_hour") == Some(42.0),
            format!(
                "status {}, five_hour {}",
                i.status,
                words::or_none(figure(i, "five_hour"))
            ),
        ),
        _ => Check::failed(
            FIGURE,
            format!("no rate_limit_event within {}s", TURN.as_secs()),
        ),
    }
}

/// The checks of the windows scenario, from what the CLI wrote: its first rate-limit
/// event, its answer to `get_usage`, whether the turn ended, and every event.
fn window_checks(
    first: Option<AgentEvent>,
    answer: Option<AgentEvent>,
    ended: bool,
    seen: &[AgentEvent],
) -> Vec<Check> {
    const MODEL_WEEK: &str = "the per-model week is in the stream and in get_usage";
    const IN_USE: &str = "overageInUse under status allowed reads as extra usage";
    const THROUGH: &str = "isUsingOverage on a response let through on credits";
    let version = seen.iter().find_map(|e| match e {
        AgentEvent::Init { version, .. } => version.clone(),
        _ => None,
    });
    let version = version.as_deref();
    let events: Vec<&crate::driver::RateLimitInfo> = seen
        .iter()
        .filter_map(|e| match e {
            AgentEvent::RateLimit(i) => Some(i),
            _ => None,
        })
        .collect();
    let mut checks = vec![first_figure(first.as_ref(), version)];
    let in_stream = events
        .iter()
        .find_map(|i| figure(i, "seven_day_overage_included"));
    let in_answer = match answer {
        Some(AgentEvent::ControlResponse {
            usage: Some(Usage::Windows(w)),
            ..
        }) => w
            .iter()
            .find(|x| x.window == "seven_day_overage_included")
            .map(|x| (x.percent, x.model.clone())),
        _ => None,
    };
    checks.push(since(
        MODEL_WEEK,
        version,
        in_stream == Some(80.0)
            && in_answer
                .as_ref()
                .is_some_and(|(p, m)| *p == 80.0 && m.is_some()),
        format!(
            "stream {}, get_usage {}",
            words::or_none(in_stream),
            in_answer.as_ref().map_or("none".into(), |(p, m)| format!(
                "{p} ({})",
                m.as_deref().unwrap_or("no model")
            ))
        ),
    ));
    let allowed_on_credits = events
        .iter()
        .any(|i| i.status == RateLimitStatus::Allowed && i.on_credits);
    checks.push(Check::new(
        IN_USE,
        allowed_on_credits,
        format!(
            "{} events, one allowed on credits: {allowed_on_credits}",
            events.len()
        ),
    ));
    let through = events
        .iter()
        .any(|i| i.status == RateLimitStatus::Rejected && i.on_credits);
    checks.push(Check::new(
        THROUGH,
        through && ended,
        format!("rejected on credits: {through}; the turn ended: {ended}"),
    ));
    checks
}

/// A limit ends the Run at once: one request, an error result read as a rate limit (by
/// its typed `api_error` from 2.1.332 on), and no request after it. A version that
/// waited for the reset inside a `-p` Run would hold a night.
pub(super) fn limit(command: &Path, record: Option<&Path>) -> Vec<Check> {
    const ENDS: &str = "a limit ends the Run at once, with no further request";
    const TYPED: &str = "a limit stop says api_error usage_limit_reached";
    // The reset is near: a CLI that waits for it would ask again within the watch below.
    let reset = chrono::Utc::now().timestamp() + 2;
    let replies = vec![
        Reply::rejected(reset),
        Reply::text("Continued after the reset."),
    ];
    let s = match scene("limit", replies, true) {
        Ok(s) => s,
        Err(why) => return vec![Check::failed(ENDS, why)],
    };
    let started = Instant::now();
    let run = match s.run(
        command,
        (tools(&[]), "Say hello."),
        None,
        StopWhen::Never,
        record,
    ) {
        Ok(run) => run,
        Err(why) => return vec![Check::failed(ENDS, why)],
    };
    let took = run
        .result_at
        .unwrap_or(run.ended)
        .saturating_duration_since(started);
    // Past the result: no further turn may come, and no further request.
    let more = run
        .lines
        .iter()
        .skip_while(|l| !is(l, "result", None))
        .skip(1)
        .find(|l| is(l, "assistant", None) || is(l, "result", None))
        .cloned();
    let calls = s.mock.calls();
    let r = run.report.result.as_ref();
    let failure = r.and_then(|r| ClaudeCode.failure(r, Some("rate_limit"), true));
    let version = run.lines.iter().find_map(|l| {
        is(l, "system", Some("init"))
            .then(|| l["claude_code_version"].as_str().map(String::from))?
    });
    let checks = vec![
        Check::new(
            ENDS,
            r.is_some()
                && failure == Some(AgentFailure::RateLimited)
                && calls == 1
                && more.is_none(),
            format!(
                "result after {} ms, read as {}; {calls} request(s); after it: {}",
                took.as_millis(),
                words::failure(failure),
                more.as_ref().map_or("nothing".into(), short)
            ),
        ),
        since(
            TYPED,
            version.as_deref(),
            r.as_ref()
                .is_some_and(|r| r.api_error.as_deref() == Some("usage_limit_reached")),
            format!(
                "api_error {}",
                words::or_none(r.as_ref().and_then(|r| r.api_error.clone()))
            ),
        ),
    ];
    checks
}

/// `auth status` tells no login, a plan login and an API key apart, locally: owl reads it
/// before a Run and in `doctor`.
pub(super) fn auth_status(command: &Path, _record: Option<&Path>) -> Vec<Check> {
    const NAME: &str = "auth status tells no login, a plan login and an API key apart";
    let scratch = match Scratch::new("auth") {
        Ok(s) => s,
        Err(e) => return vec![Check::failed(NAME, format!("making a scratch dir: {e}"))],
    };
    let mock = match MockApi::start() {
        Ok(m) => m,
        Err(e) => return vec![Check::failed(NAME, format!("starting the mock API: {e}"))],
    };
    let local = crate::supervise::LocalExecutor {
        state_dir: scratch.0.clone(),
    };
    let login_of = |account: &Account| {
        crate::supervise::check_login(&local, &ClaudeCode, command, account).map(|l| l.method)
    };
    for dir in ["none", "plan", "key"] {
        if let Err(e) = std::fs::create_dir_all(scratch.0.join(dir)) {
            return vec![Check::failed(NAME, format!("making a scratch dir: {e}"))];
        }
    }
    let none = account(&scratch.0.join("none"), &mock, false);
    // A stored plan login, as `/login` leaves it (fake tokens: nothing leaves the machine).
    let plan = account(&scratch.0.join("plan"), &mock, false);
    let store = plan.credential_store.clone().unwrap_or_default();
    let expires = (chrono::Utc::now().timestamp() + 3600) * 1000;
    let stored = json!({"claudeAiOauth": {"accessToken": "sk-ant-oat01-FAKE-owl-conformance",
        "refreshToken": "sk-ant-ort01-FAKE-owl-conformance", "expiresAt": expires,
        "scopes": ["user:inference", "user:profile"], "subscriptionType": "max",
        "rateLimitTier": "default_claude_max_20x"}});
    if let Err(e) = std::fs::create_dir_all(&store)
        .and_then(|()| std::fs::write(store.join(".credentials.json"), stored.to_string()))
    {
        return vec![Check::failed(NAME, format!("writing the fake login: {e}"))];
    }
    let mut key = account(&scratch.0.join("key"), &mock, false);
    let mut env = key.env.0.clone();
    env.insert(
        "ANTHROPIC_API_KEY".into(),
        "sk-ant-api03-FAKE-owl-conformance".into(),
    );
    key.env = Env(env);
    let seen = [login_of(&none), login_of(&plan), login_of(&key)];
    let wanted = [Some("none"), Some("claude.ai"), Some("api_key")];
    let ok = seen.iter().map(Option::as_deref).eq(wanted) && mock.calls() == 0;
    vec![Check::new(
        NAME,
        ok,
        format!(
            "{}; {} request(s) to the API",
            seen.iter()
                .map(|s| words::or_none(s.as_deref()))
                .collect::<Vec<_>>()
                .join(", "),
            mock.calls()
        ),
    )]
}
