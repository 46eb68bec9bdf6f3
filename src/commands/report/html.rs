//! The report as one self-contained HTML page: inline CSS and SVG, no script, nothing fetched; readable in a browser and printable.

use chrono::{DateTime, FixedOffset, Utc};

use super::{AccountReport, Report, WindowSeries};

/// The plot inside each chart, in SVG units.
const LEFT: f64 = 64.0;
const RIGHT: f64 = 944.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 196.0;
/// The Runs' lane under the plot.
const LANE: f64 = 212.0;
/// The narrowest a Run's bar is drawn, in the chart's units (960 across).
const MIN_RUN_WIDTH: f64 = 8.0;

/// One colour per Window, in order.
const COLOURS: [&str; 4] = ["#1f6feb", "#8250df", "#1a7f37", "#bf8700"];

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1000px;color:#1f2328}\
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}table{border-collapse:collapse;width:100%}\
td,th{border-bottom:1px solid #d0d7de;padding:.3em .5em;text-align:left;vertical-align:top}\
.muted{color:#656d76}svg{width:100%;height:auto;border:1px solid #d0d7de;background:#fff}\
.ceiling{stroke:#cf222e;stroke-width:2;stroke-dasharray:8 5}.night{stroke:#8250df;stroke-width:2;stroke-dasharray:3 3}.morning{stroke:#bf8700;stroke-width:2}.reset{stroke:#656d76;stroke-dasharray:2 4}\
.run{fill:#8c959f;stroke:#fff;stroke-width:1}.run.stopped{fill:#cf222e}.run.cancelled{fill:#fff;stroke:#656d76;stroke-width:2}.axis{stroke:#d0d7de}text{font:12px system-ui,sans-serif;fill:#656d76}\
.legend{display:flex;flex-wrap:wrap;gap:.2em 1.4em}.legend span{white-space:nowrap}.legend span.share{white-space:normal}.legend i{display:inline-block;width:1.6em;height:.25em;vertical-align:middle;margin-right:.4em}\
details summary{cursor:pointer}@media print{body{margin:0}}\
.by-hour{width:auto;margin-top:.8em}.by-hour caption{text-align:left;color:#656d76}.bar{display:inline-block;height:.7em}.bar.yours{background:#0969da}.bar.owls{background:#8c959f}";

/// One Run of a Job's cell: how it ended, what owl noted, what its check found.
fn run_line(r: &super::RunReport, local: &dyn Fn(&DateTime<Utc>) -> String) -> String {
    let mut line = format!(
        "run {} on {} at {}: {}",
        r.id,
        esc(&r.account),
        esc(&local(&r.started_at)),
        esc(r.outcome.as_deref().unwrap_or("running")),
    );
    if let Some(s) = &r.stop_reason {
        line.push_str(&format!(" ({})", esc(s)));
    }
    if let Some(n) = &r.note {
        line.push_str(&format!(" — note: {}", esc(n)));
    }
    if let Some(c) = &r.check_said {
        line.push_str(&format!(" — check: {}", esc(c)));
    }
    line
}

fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The x of a time, and the y of a percent.
struct Scale {
    since: DateTime<Utc>,
    until: DateTime<Utc>,
}

impl Scale {
    fn x(&self, t: DateTime<Utc>) -> f64 {
        let span = (self.until - self.since).num_seconds().max(1) as f64;
        let at = ((t - self.since).num_seconds() as f64 / span).clamp(0.0, 1.0);
        LEFT + at * (RIGHT - LEFT)
    }

    fn y(percent: f64) -> f64 {
        BOTTOM - percent.clamp(0.0, 100.0) / 100.0 * (BOTTOM - TOP)
    }
}

/// The whole page.
pub(super) fn page(report: &Report, offset: &FixedOffset) -> String {
    let local = |t: &DateTime<Utc>| t.with_timezone(offset).format("%a %H:%M").to_string();
    let (since, until) = crate::clock::span_ends(report.since, report.until, offset, "%a %H:%M");
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>owl report {}</title><style>{STYLE}</style></head><body>\n\
         <h1>owl report: {} → {}</h1>\n<p>{}</p>\n",
        esc(&since),
        esc(&since),
        esc(&until),
        esc(&report.summary)
    );
    // The night at a glance first: each Account's chart, then the Jobs.
    let scale = Scale {
        since: report.since,
        until: report.until,
    };
    for account in &report.accounts {
        out.push_str(&format!("<h2>Account {}</h2>\n", esc(&account.name)));
        out.push_str(&legend(account, &(report.since..=report.until)));
        out.push_str(&chart(account, &scale, &local));
        out.push_str(&super::by_hour::table(&account.by_hour, &local));
    }
    out.push_str(&jobs_table(report, &local));
    out.push_str("</body></html>\n");
    out
}

/// The Jobs, one row each, a Job's Runs folded (a night of sixty Runs is a page of them).
fn jobs_table(report: &Report, local: &dyn Fn(&DateTime<Utc>) -> String) -> String {
    let mut out = String::from("<h2>Jobs</h2>\n<table><tr><th>Job</th><th>State</th><th>Branch</th><th>Cost</th><th>Runs</th><th>Next</th></tr>\n");
    for job in &report.jobs {
        let lines: Vec<String> = job.runs.iter().map(|r| run_line(r, local)).collect();
        let runs = match lines.len() {
            0 => "none".to_string(),
            n => format!(
                "<details><summary>{n} Run{}</summary>{}</details>",
                if n == 1 { "" } else { "s" },
                lines.join("<br>")
            ),
        };
        let denied: String = job
            .denied_tools
            .iter()
            .map(|d| {
                format!(
                    "<br><span class=\"muted\">denied: {} {}</span>",
                    esc(&d.tool_name),
                    esc(&d.detail)
                )
            })
            .collect();
        out.push_str(&format!(
            "<tr><td>{}{}</td><td>{}{}</td><td>{}<br><span class=\"muted\">{}</span></td><td>${:.2}{}</td><td>{}{denied}</td><td>{}</td></tr>\n",
            esc(&job.id),
            // A named Job's id is its name: said once.
            job.name.as_deref().filter(|n| *n != job.id).map(|n| format!(" ({})", esc(n))).unwrap_or_default()
                + &if job.after.is_empty() {
                    String::new()
                } else {
                    format!("<br><span class=\"muted\">after {}</span>", esc(&job.after.join(", ")))
                },
            esc(&job.state) + if job.verified { " (verified)" } else { "" },
            job.reason.as_deref().map(|r| format!("<br><span class=\"muted\">{}</span>", esc(r))).unwrap_or_default(),
            esc(&job.branch),
            job.commits.map_or("not created".into(), |c| changes(c, job.files_changed.unwrap_or(0), job.insertions.unwrap_or(0), job.deletions.unwrap_or(0))),
            job.cost_usd,
            job.budget_left_usd.map(|b| format!("<br><span class=\"muted\">${b:.2} left</span>")).unwrap_or_default(),
            runs,
            esc(job.next_step.as_deref().unwrap_or("none (no Handoff yet)")),
        ));
    }
    out.push_str("</table>\n");
    out
}

/// A branch's changes in words: "no commits", "1 commit, 2 files, +10 -3".
fn changes(commits: usize, files: usize, insertions: usize, deletions: usize) -> String {
    let counted = |n: usize, one: &str| match n {
        1 => format!("1 {one}"),
        n => format!("{n} {one}s"),
    };
    match commits {
        0 => "no commits".into(),
        c => format!(
            "{}, {}, +{insertions} -{deletions}",
            counted(c, "commit"),
            counted(files, "file")
        ),
    }
}

/// The chart's key, above it where no data is drawn: each Window's colour, and its ceiling.
fn legend(account: &AccountReport, period: &std::ops::RangeInclusive<DateTime<Utc>>) -> String {
    let items: Vec<String> = account
        .windows
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let colour = COLOURS[i % COLOURS.len()];
            let ceiling = w
                .ceiling
                .map(|c| format!(", ceiling {}% (dashed red)", crate::text::fmt_percent(c)))
                .unwrap_or_default();
            format!(
                "<span><i style=\"background:{colour}\"></i>{}{ceiling}</span>",
                esc(&w.window)
            )
        })
        .collect();
    // Only what the chart draws: a night ceiling where a night meets the period, a
    // morning where one falls in it.
    let night = match &account.night {
        Some((max, nights)) if !nights.is_empty() => format!(
            "<span><i style=\"background:#8250df\"></i>night ceiling {}% (dotted purple)</span>",
            crate::text::fmt_percent(*max)
        ),
        _ => String::new(),
    };
    let morning = match &account.night {
        Some((_, nights)) if nights.iter().any(|(_, m)| period.contains(m)) => {
            "<span><i style=\"background:#bf8700\"></i>the morning</span>"
        }
        _ => "",
    };
    let shares: String = account
        .owl_share
        .iter()
        .map(|s| {
            format!(
                "<span class=\"share\">{}</span>",
                esc(&super::text::share_said(s))
            )
        })
        .collect();
    format!(
        "<p class=\"legend\">{}{night}{morning}<span><i style=\"background:#8c959f\"></i>a Run (red: stopped by owl; outlined: cancelled by you)</span>{shares}</p>\n",
        items.join("")
    )
}

/// One Account's chart: a stepped path per Window, its ceiling as a dashed line, resets as
/// dotted verticals, the Runs as bars under the plot (red where owl stopped one).
fn chart(
    account: &AccountReport,
    scale: &Scale,
    local: &dyn Fn(&DateTime<Utc>) -> String,
) -> String {
    let mut svg = format!(
        "<svg class=\"utilization\" data-account=\"{}\" viewBox=\"0 0 960 240\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">\n",
        esc(&account.name)
    );
    for percent in [0.0, 50.0, 100.0] {
        let y = Scale::y(percent);
        svg.push_str(&format!(
            "<line class=\"axis\" x1=\"{LEFT}\" x2=\"{RIGHT}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/><text x=\"4\" y=\"{:.1}\">{percent}%</text>\n",
            y + 4.0
        ));
    }
    svg.push_str(&format!(
        "<text x=\"{LEFT}\" y=\"236\">{}</text><text x=\"{RIGHT}\" y=\"236\" text-anchor=\"end\">{}</text>\n",
        esc(&local(&scale.since)),
        esc(&local(&scale.until))
    ));
    for (i, series) in account.windows.iter().enumerate() {
        svg.push_str(&window_path(series, scale, COLOURS[i % COLOURS.len()]));
    }
    if account.windows.iter().all(|w| w.snapshots.is_empty()) {
        // Where no ceiling line runs: the free height farthest from every one.
        let ceilings: Vec<f64> = account.windows.iter().filter_map(|w| w.ceiling).collect();
        let at = [85.0, 30.0, 10.0]
            .into_iter()
            .max_by(|a: &f64, b: &f64| {
                let room = |p: f64| ceilings.iter().map(|c| (c - p).abs()).fold(100.0, f64::min);
                room(*a).total_cmp(&room(*b))
            })
            .unwrap_or(30.0);
        svg.push_str(&format!(
            "<text class=\"empty\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">no utilization observed in this period</text>\n",
            (LEFT + RIGHT) / 2.0,
            Scale::y(at) + 4.0
        ));
    }
    svg.push_str(&ceiling_labels(&account.windows));
    svg.push_str(&night_lines(account, scale, local));
    for (r, (x1, x2)) in account.runs.iter().zip(run_bars(account, scale)) {
        // A person's cancel is theirs, not a stop of owl's: drawn apart.
        let class = match r.stop {
            Some(crate::model::StopKind::Cancelled) => "run cancelled",
            Some(_) => "run stopped",
            None => "run",
        };
        svg.push_str(&format!(
            "<rect class=\"{class}\" data-run=\"{}\" x=\"{x1:.1}\" y=\"{LANE}\" width=\"{:.1}\" height=\"10\"><title>run {} of job {}: {}{}</title></rect>\n",
            r.id,
            x2 - x1,
            r.id,
            esc(&r.job_id),
            esc(r.outcome.as_deref().unwrap_or("running")),
            r.stop_reason.as_deref().map(|s| format!(" ({})", esc(s))).unwrap_or_default(),
        ));
    }
    svg.push_str("</svg>\n");
    svg
}

/// The night ceiling (dotted purple) and each morning (a gold vertical), where a morning
/// is configured: a Window that resets before the morning may reach the first.
fn night_lines(
    account: &AccountReport,
    scale: &Scale,
    local: &dyn Fn(&DateTime<Utc>) -> String,
) -> String {
    let Some((night_max, nights)) = &account.night else {
        return String::new();
    };
    let y = Scale::y(*night_max);
    let mut out = String::new();
    // Across each night only (from the day's end to the morning): by day the day's
    // ceilings hold.
    for (starts, morning) in nights {
        let (x1, x2) = (
            scale.x((*starts).max(scale.since)),
            scale.x((*morning).min(scale.until)),
        );
        out.push_str(&format!(
            "<line class=\"night\" data-percent=\"{night_max}\" x1=\"{x1:.1}\" x2=\"{x2:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\"><title>night ceiling {}%: a Window that resets before the morning may reach it</title></line>\n",
            crate::text::fmt_percent(*night_max)
        ));
    }
    let mornings = nights
        .iter()
        .map(|(_, m)| m)
        .filter(|m| (scale.since..=scale.until).contains(m));
    for m in mornings {
        let x = scale.x(*m);
        out.push_str(&format!(
            "<line class=\"morning\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{TOP}\" y2=\"{BOTTOM}\"><title>the morning, {}</title></line>\n",
            esc(&local(m))
        ));
    }
    out
}

/// Each Run's bar, `(x1, x2)`: a Run of seconds in a night of hours is still a bar one can
/// see and point at, and Runs a minute apart are bars apart, not one block: pushed right
/// past the bar before, then, where that runs off the chart, left of the bar after.
fn run_bars(account: &AccountReport, scale: &Scale) -> Vec<(f64, f64)> {
    const GAP: f64 = 1.0;
    let mut bars: Vec<(f64, f64)> = Vec::with_capacity(account.runs.len());
    for r in &account.runs {
        let start = scale.x(r.started_at);
        let end = scale.x(r.ended_at.unwrap_or(scale.until));
        let width = (end - start).max(MIN_RUN_WIDTH);
        let x1 = bars.last().map_or(start, |(_, x2)| start.max(x2 + GAP));
        bars.push((x1, x1 + width));
    }
    let mut limit = RIGHT;
    for bar in bars.iter_mut().rev() {
        if bar.1 > limit {
            let width = bar.1 - bar.0;
            *bar = ((limit - width).max(LEFT), limit);
        }
        limit = bar.0 - GAP;
    }
    bars
}

fn window_path(series: &WindowSeries, scale: &Scale, colour: &str) -> String {
    let mut d = String::new();
    let mut last_y = None;
    for p in &series.snapshots {
        let t = p.observed_at;
        let (x, y) = (scale.x(t), Scale::y(p.percent));
        match last_y {
            None => d.push_str(&format!("M{x:.1} {y:.1}")),
            // Stepped: a figure holds until the next one.
            Some(_) => d.push_str(&format!(" H{x:.1} V{y:.1}")),
        }
        last_y = Some(y);
    }
    if last_y.is_some() {
        d.push_str(&format!(" H{RIGHT:.1}"));
    }
    let mut out = format!(
        "<path class=\"window\" data-window=\"{}\" d=\"{d}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"3\"/>\n",
        esc(&series.window)
    );
    if let Some(ceiling) = series.ceiling {
        let y = Scale::y(ceiling);
        out.push_str(&format!(
            "<line class=\"ceiling\" data-window=\"{}\" data-percent=\"{ceiling}\" x1=\"{LEFT}\" x2=\"{RIGHT}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/>\n",
            esc(&series.window)
        ));
    }
    for reset in series.resets.iter().copied() {
        let x = scale.x(reset);
        out.push_str(&format!(
            "<line class=\"reset\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{TOP}\" y2=\"{BOTTOM}\"/>\n"
        ));
    }
    out
}

/// Each ceiling's label, its Window and figure, at the right end of its line and above it
/// (the axis's figures stay in the margin, so the two never meet); a label that would
/// overlap the one before is moved up a line.
fn ceiling_labels(windows: &[WindowSeries]) -> String {
    const LINE: f64 = 13.0;
    let mut taken: Vec<f64> = Vec::new();
    let mut out = String::new();
    for (i, series) in windows.iter().enumerate() {
        let Some(ceiling) = series.ceiling else {
            continue;
        };
        let mut y = Scale::y(ceiling) - 4.0;
        while taken.iter().any(|t| (t - y).abs() < LINE) {
            y -= LINE;
        }
        let y = y.max(TOP + 10.0);
        taken.push(y);
        out.push_str(&format!(
            "<text class=\"ceiling-label\" data-window=\"{}\" x=\"{:.1}\" y=\"{y:.1}\" text-anchor=\"end\" style=\"fill:{}\">{} ceiling {}%</text>\n",
            esc(&series.window),
            RIGHT - 4.0,
            COLOURS[i % COLOURS.len()],
            esc(&series.window),
            crate::text::fmt_percent(ceiling)
        ));
    }
    out
}
