//! owl's verdicts on Claude Code's Runs: a turn read to its result and judged succeeded, and a stop mid-turn asked on stdin, answered, and judged interrupted.

use super::*;
use crate::model::{RunOutcome, StopCause};

/// owl supervises a turn to its result and the CLI's own exit, and judges it succeeded.
pub(super) fn supervised_turn(run: &Supervised) -> Check {
    const NAME: &str = "owl supervises a turn to its result and exit, and judges it succeeded";
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
    Check::new(
        NAME,
        ok,
        format!(
            "{} events, session named: {session}, {}, judged {}",
            run.events.len(),
            run.report.exit,
            run.classified.outcome
        ),
    )
}

/// owl's stop mid-turn (a cancel) is asked on stdin and answered with the turn's result:
/// the Run is judged interrupted, not failed.
pub(super) fn supervised_stop(run: &Supervised) -> Check {
    const NAME: &str = "owl's stop mid-turn is answered on stdin with the turn's result";
    let ok = run.stopped.is_some()
        && run.report.stop == Some(StopCause::Cancelled)
        && run.report.result.is_some()
        && run.classified.outcome == RunOutcome::Interrupted;
    Check::new(
        NAME,
        ok,
        format!(
            "stopped: {}, result read: {}, {}, judged {}",
            run.stopped.is_some(),
            run.report.result.is_some(),
            run.report.exit,
            run.classified.outcome
        ),
    )
}
