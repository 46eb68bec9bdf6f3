//! Claude Code's answer to an interrupt: a turn whose tool runs until killed ends with a result in time, and the tool is gone after.

use super::*;

/// An interrupt while a tool runs ends the turn with a result in time, and the tool is gone.
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
    let mut s = match scene(
        "interrupt",
        command,
        replies,
        tools(&["Bash(tail:*)"]),
        true,
    ) {
        Ok(s) => s,
        Err(why) => return vec![Check::failed(ENDS, why)],
    };
    if let Err(e) = std::fs::write(s.scratch.0.join("owl-conformance.log"), b"") {
        return vec![Check::failed(
            ENDS,
            format!("writing the file the tool follows: {e}"),
        )];
    }
    s.session
        .send(&ClaudeCode.prompt_input("Wait a long time."));
    let tool = |pid: &i32| crate::sys::cmdline(*pid).contains(&tool_command);
    let deadline = Instant::now() + TURN;
    while !crate::sys::all_pids().iter().any(tool) {
        if Instant::now() >= deadline {
            let last = s.session.seen.last().map(short).unwrap_or_default();
            return vec![Check::failed(
                ENDS,
                format!("the turn's tool never started; the last line: {last}"),
            )];
        }
        let _ = s.session.wait_for(Duration::from_millis(50), |_| false);
    }
    let asked = Instant::now();
    if let Some(crate::driver::Interrupt::Stdin(bytes)) = ClaudeCode.interrupt("owl-interrupt") {
        s.session.send(&bytes);
    }
    let result = s
        .session
        .wait_for(crate::driver::INTERRUPT_WAIT, |l| is(l, "result", None));
    let ends = match result {
        Some(_) => Check::new(
            ENDS,
            true,
            format!(
                "result {} ms after the interrupt",
                asked.elapsed().as_millis()
            ),
        ),
        None => Check::failed(
            ENDS,
            format!(
                "no result within {}s of the interrupt",
                crate::driver::INTERRUPT_WAIT.as_secs()
            ),
        ),
    };
    s.end(record);
    let gone = tool_gone(&tool_command);
    vec![ends, gone]
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
