//! The one live line a tick draws on a terminal while its Run goes: elapsed, turns, cost, the last event, the newest utilization.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use crate::driver::{AgentEvent, Usage};
use crate::supervise::RunReport;

/// How often the line is redrawn at most.
const REDRAW: Duration = Duration::from_millis(250);

/// The line, or nothing when stderr is not a terminal.
pub(super) struct LiveLine {
    label: String,
    started: Instant,
    drawn: Option<Instant>,
    turns: u32,
    cost: Option<f64>,
    utilization: Option<(String, f64)>,
}

impl LiveLine {
    /// A line for this Run when stderr is a terminal; `None` (nothing drawn) otherwise.
    pub(super) fn on_terminal(job_id: &str, account: &str) -> Option<LiveLine> {
        std::io::stderr().is_terminal().then(|| LiveLine {
            label: format!("job {job_id} on {account}"),
            started: Instant::now(),
            drawn: None,
            turns: 0,
            cost: None,
            utilization: None,
        })
    }

    /// Takes what an event tells.
    pub(super) fn note(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::Assistant {
                synthetic: false, ..
            } => self.turns += 1,
            AgentEvent::Result(r) => self.cost = r.cost_usd.or(self.cost),
            AgentEvent::ControlResponse {
                cost_usd: Some(cost),
                ..
            } => {
                self.cost = Some(*cost);
                self.note_usage(event);
            }
            AgentEvent::Usage { .. } | AgentEvent::ControlResponse { .. } => self.note_usage(event),
            AgentEvent::RateLimit(info) => {
                if let (Some(window), Some(u)) = (&info.window, info.utilization) {
                    self.utilization = Some((window.clone(), u * 100.0));
                }
            }
            _ => {}
        }
    }

    fn note_usage(&mut self, event: &AgentEvent) {
        let windows = match event {
            AgentEvent::Usage { windows, .. }
            | AgentEvent::ControlResponse {
                usage: Some(Usage::Windows(windows)),
                ..
            } => windows,
            _ => return,
        };
        if let Some(w) = windows
            .iter()
            .find(|w| crate::model::WindowKind::of(&w.window) == crate::model::WindowKind::FiveHour)
        {
            self.utilization = Some((w.window.clone(), w.percent));
        }
    }

    /// Redraws the line if it is due.
    pub(super) fn draw(&mut self, report: &RunReport) {
        let now = Instant::now();
        if self.drawn.is_some_and(|t| now - t < REDRAW) {
            return;
        }
        self.drawn = Some(now);
        let line = self.render(report, now - self.started);
        let mut err = std::io::stderr().lock();
        // \r and erase-line: the one line is redrawn in place.
        let _ = write!(err, "\r\x1b[K{line}");
        let _ = err.flush();
    }

    /// Erases the line, leaving the terminal as it was.
    pub(super) fn clear(&self) {
        if self.drawn.is_some() {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
        }
    }

    fn render(&self, report: &RunReport, elapsed: Duration) -> String {
        let secs = elapsed.as_secs();
        let cost = self.cost.map_or("cost —".into(), |c| format!("${c:.2}"));
        let utilization = self
            .utilization
            .as_ref()
            .map_or("utilization —".into(), |(w, p)| {
                format!("{w} {}%", crate::text::fmt_percent(*p))
            });
        let last = report.last_event.as_deref().unwrap_or("starting");
        let last = crate::output::inert(&crate::text::truncate(last, 40)).into_owned();
        format!(
            "owl: {} · {}m{:02}s · {} turn{} · {cost} · {last} · {utilization}",
            self.label,
            secs / 60,
            secs % 60,
            self.turns,
            if self.turns == 1 { "" } else { "s" },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::WindowUsage;

    #[test]
    fn the_line_says_time_turns_cost_last_event_and_utilization() {
        let mut line = LiveLine {
            label: "job ab12 on work".into(),
            started: Instant::now(),
            drawn: None,
            turns: 0,
            cost: None,
            utilization: None,
        };
        let report = RunReport {
            last_event: Some("tool result".into()),
            ..Default::default()
        };
        assert_eq!(
            line.render(&report, Duration::from_secs(83)),
            "owl: job ab12 on work · 1m23s · 0 turns · cost — · tool result · utilization —"
        );
        line.note(&AgentEvent::Assistant {
            summary: "x".into(),
            synthetic: false,
            error: None,
        });
        line.note(&AgentEvent::Usage {
            source: crate::model::SnapshotSource::Rollout,
            windows: vec![WindowUsage {
                window: "five_hour".into(),
                percent: 42.5,
                resets_at: None,
                model: None,
            }],
        });
        assert_eq!(
            line.render(&report, Duration::from_secs(5)),
            "owl: job ab12 on work · 0m05s · 1 turn · cost — · tool result · five_hour 42.5%"
        );
        // Claude Code's usage answer tells the session's cost so far.
        line.note(&AgentEvent::ControlResponse {
            request_id: "owl-usage-1".into(),
            ok: true,
            usage: None,
            cost_usd: Some(0.123),
        });
        assert!(line
            .render(&report, Duration::from_secs(6))
            .contains("· $0.12 ·"));
    }
}
