//! Claude Code supervised by owl itself: a Run read to its result and judged, and a stop mid-turn asked on stdin and answered.

use super::*;
use crate::conformance::supervised::{self, Supervised};
use crate::model::{RunOutcome, StopCause};

/// A Run of the CLI against the mock's `replies`, supervised by owl to its end; the
/// observer stops it at the first event `stop_at` picks.
fn supervised_run(
    label: &'static str,
    command: &Path,
    replies: Vec<Reply>,
    allowed: &[&str],
    stop_at: fn(&AgentEvent) -> bool,
    before: impl FnOnce(&Path) -> std::io::Result<()>,
) -> Result<Supervised, String> {
    let scratch = Scratch::new(label).map_err(|e| format!("making a scratch dir: {e}"))?;
    let mock = MockApi::start().map_err(|e| format!("starting the mock API: {e}"))?;
    mock.script(replies);
    before(&scratch.0).map_err(|e| format!("preparing the scratch dir: {e}"))?;
    let account = account(&scratch.0, &mock, true);
    let allowed: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
    let invocation = ClaudeCode.invocation(&RunRequest {
        command,
        account: &account,
        permission_mode: "dontAsk",
        max_budget_usd: None,
        allowed_tools: &allowed,
        disallowed_tools: &[],
        model: None,
        standing_instructions: MARKER,
        prompt: "",
        files_dir: &scratch.0,
        cwd: &scratch.0,
        writable_dirs: &[],
    });
    supervised::supervise(supervised::Run {
        driver: std::sync::Arc::new(ClaudeCode),
        command,
        account: &account,
        invocation: &invocation,
        prompt: "Do what the replies say.",
        dir: &scratch.0,
        limit: TURN,
        stop_at,
    })
    .map_err(|e| format!("starting '{}': {e}", command.display()))
}

/// owl supervises a turn to its result and the CLI's own exit, and judges it succeeded.
pub(super) fn supervised_turn(command: &Path, _record: Option<&Path>) -> Vec<Check> {
    const NAME: &str = "owl supervises a turn to its result and exit, and judges it succeeded";
    let run = match supervised_run(
        "supervised-turn",
        command,
        vec![Reply::text("Hello.")],
        &[],
        |_| false,
        |_| Ok(()),
    ) {
        Ok(run) => run,
        Err(why) => return vec![Check::failed(NAME, why)],
    };
    let session = run.events.iter().any(|e| {
        matches!(
            e,
            AgentEvent::Init {
                session_id: Some(_),
                ..
            }
        )
    });
    let ok = session
        && run.report.result.is_some()
        && run.report.stop.is_none()
        && run.report.exit.code == Some(0)
        && run.classified.outcome == RunOutcome::Succeeded;
    vec![Check::new(
        NAME,
        ok,
        format!(
            "{} events, session named: {session}, {}, judged {}",
            run.events.len(),
            run.report.exit,
            run.classified.outcome
        ),
    )]
}

/// owl's stop mid-turn (a cancel) is asked on stdin and answered with the turn's result:
/// the Run is judged interrupted, not failed.
pub(super) fn supervised_stop(command: &Path, _record: Option<&Path>) -> Vec<Check> {
    const NAME: &str = "owl's stop mid-turn is answered on stdin with the turn's result";
    let tool_command = format!("tail -s 608.{} -f owl-conformance.log", std::process::id());
    let replies = vec![Reply::tool(
        "Bash",
        json!({"command": tool_command, "description": "Follow nothing for a long time"}),
    )];
    let run = supervised_run(
        "supervised-stop",
        command,
        replies,
        &["Bash(tail:*)"],
        |e| matches!(e, AgentEvent::Assistant { .. }),
        |dir| std::fs::write(dir.join("owl-conformance.log"), b""),
    );
    // The tool runs in a session of its own: a scenario kills only its CLI's group.
    for pid in crate::sys::all_pids() {
        if crate::sys::cmdline(pid).contains(&tool_command) {
            let _ = crate::sys::signal_pid(pid, crate::sys::Sig::KILL);
        }
    }
    let run = match run {
        Ok(run) => run,
        Err(why) => return vec![Check::failed(NAME, why)],
    };
    let ok = run.stopped
        && run.report.stop == Some(StopCause::Cancelled)
        && run.report.result.is_some()
        && run.classified.outcome == RunOutcome::Interrupted;
    vec![Check::new(
        NAME,
        ok,
        format!(
            "stopped: {}, result read: {}, {}, judged {}",
            run.stopped,
            run.report.result.is_some(),
            run.report.exit,
            run.classified.outcome
        ),
    )]
}
