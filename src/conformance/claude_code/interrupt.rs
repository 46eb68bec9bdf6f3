//! Claude Code's answer to owl's stop: a turn whose tool runs until killed, stopped by owl once the tool runs, ends with a result in time, and the tool is gone after.

use super::*;

/// owl's stop while a tool runs ends the turn with a result in time, the tool is gone, and
/// owl judges the Run interrupted.
pub(super) fn interrupt(command: &Path, record: Option<&Path>) -> Vec<Check> {
    const ENDS: &str = "an interrupt ends the turn with a result in time";
    // A tool that runs until it is killed, found again by its argument. Not a standalone
    // `sleep`, which 2.1.332 refuses to run ("Blocked: standalone sleep").
    // It follows a file in the working directory: a path outside it is denied under dontAsk.
    let tool_command = format!("tail -s 607.{} -f owl-conformance.log", std::process::id());
    let replies = vec![Reply::tool(
        "Bash",
        json!({"command": tool_command, "description": "Follow nothing for a long time"}),
    )];
    let s = match scene("interrupt", replies, true) {
        Ok(s) => s,
        Err(why) => return vec![Check::failed(ENDS, why)],
    };
    if let Err(e) = std::fs::write(s.scratch.0.join("owl-conformance.log"), b"") {
        return vec![Check::failed(
            ENDS,
            format!("writing the file the tool follows: {e}"),
        )];
    }
    // owl stops the Run (as a cancel would) once the tool runs.
    let tool_running = || {
        crate::sys::all_pids()
            .iter()
            .any(|pid| crate::sys::cmdline(*pid).contains(&tool_command))
    };
    let asked = (tools(&["Bash(tail:*)"]), "Wait a long time.");
    let run = s.run(command, asked, None, StopWhen::Once(&tool_running), record);
    let gone = tool_gone(&tool_command);
    let run = match run {
        Ok(run) => run,
        Err(why) => return vec![Check::failed(ENDS, why), gone],
    };
    let ends = match (run.stopped, run.result_at) {
        (Some(asked), Some(at))
            if at.saturating_duration_since(asked) <= crate::driver::INTERRUPT_WAIT =>
        {
            Check::new(
                ENDS,
                true,
                format!(
                    "result {} ms after the interrupt",
                    at.saturating_duration_since(asked).as_millis()
                ),
            )
        }
        (Some(_), _) => Check::failed(
            ENDS,
            format!(
                "no result within {}s of the interrupt",
                crate::driver::INTERRUPT_WAIT.as_secs()
            ),
        ),
        (None, _) => {
            let last = run.lines.last().map(short).unwrap_or_default();
            Check::failed(
                ENDS,
                format!("the turn's tool never started; the last line: {last}"),
            )
        }
    };
    vec![ends, gone, supervised_stop(&run)]
}

/// The interrupted turn's tool process is gone a moment after the CLI ended (it is killed
/// if not, so that nothing outlives the check).
fn tool_gone(tool_command: &str) -> Check {
    const GONE: &str = "the interrupted turn's tool process is gone afterwards";
    let tool = |pid: &i32| crate::sys::cmdline(*pid).contains(tool_command);
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut left: Vec<i32> = crate::sys::all_pids().into_iter().filter(tool).collect();
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left = crate::sys::all_pids().into_iter().filter(tool).collect();
    }
    if left.is_empty() {
        Check::new(GONE, true, "no process of it left")
    } else {
        for pid in &left {
            let _ = crate::sys::signal_pid(*pid, crate::sys::Sig::KILL);
        }
        Check::failed(
            GONE,
            format!(
                "still running: pid {} (owl kills it after a Run)",
                left.iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    }
}
