//! The report's utilization chart in text: one row of block characters per Window across the period, the ceiling marked, and a row of the Account's Runs with their stops.

use chrono::{DateTime, Utc};

use super::{AccountReport, RunReport, WindowSeries};

/// Columns across the period.
pub(super) const WIDTH: usize = 48;

const BLOCKS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// The column a time falls in, clamped to the chart.
fn column(t: DateTime<Utc>, since: DateTime<Utc>, until: DateTime<Utc>) -> usize {
    let span = (until - since).num_seconds().max(1) as f64;
    let at = (t - since).num_seconds() as f64 / span;
    ((at * WIDTH as f64) as usize).min(WIDTH - 1)
}

/// Each column's utilization: the highest figure observed in it, and between figures the
/// last one (utilization persists until the next figure); `None` before the first figure.
pub(super) fn columns(
    series: &WindowSeries,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Vec<Option<f64>> {
    let mut cols: Vec<Option<f64>> = vec![None; WIDTH];
    let points: Vec<(usize, f64)> = series
        .snapshots
        .iter()
        .map(|p| (column(p.observed_at, since, until), p.percent))
        .collect();
    for (i, (col, percent)) in points.iter().enumerate() {
        let next = points.get(i + 1).map_or(WIDTH, |(c, _)| *c);
        for c in cols.iter_mut().take(next.max(col + 1)).skip(*col) {
            *c = Some(c.map_or(*percent, |v: f64| v.max(*percent)));
        }
    }
    cols
}

fn block(percent: f64) -> char {
    BLOCKS[((percent.clamp(0.0, 100.0) / 100.0 * 8.0).ceil() as usize).min(8)]
}

/// The rows of one Account: a row per Window, then its Runs.
pub(super) fn account_rows(
    account: &AccountReport,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    colour: bool,
) -> Vec<String> {
    let mut rows = Vec::new();
    let label_width = account
        .windows
        .iter()
        .map(|w| w.window.len())
        .chain([4])
        .max()
        .unwrap_or(4);
    if account.windows.iter().all(|w| w.snapshots.is_empty()) {
        rows.push("no utilization observed".into());
    }
    for series in &account.windows {
        let cols = columns(series, since, until);
        let mut row = String::new();
        for c in &cols {
            let ch = c.map_or('·', block);
            let over = matches!((c, series.ceiling), (Some(p), Some(ceiling)) if *p >= ceiling);
            if over && colour {
                row.push(crate::output::RED);
                row.push(ch);
                row.push(crate::output::PLAIN);
            } else if over {
                // Without colours a figure over the ceiling still stands out.
                row.push('!');
            } else {
                row.push(ch);
            }
        }
        let peak = series
            .snapshots
            .iter()
            .map(|p| p.percent)
            .fold(None, |m: Option<f64>, p| Some(m.map_or(p, |m| m.max(p))));
        let peak = peak.map_or("no figure".into(), |p| {
            format!("peak {}%", crate::text::fmt_percent(p))
        });
        // With a morning known, a figure over the day's ceiling may be within the night's
        // (its Window reset before the morning): the words name both.
        let night = match (&account.night, series.ceiling) {
            (Some((max, _)), Some(c)) if *max > c => {
                format!(" (night ceiling {}%)", crate::text::fmt_percent(*max))
            }
            _ => String::new(),
        };
        let ceiling = series.ceiling.map_or("no ceiling".into(), |c| {
            format!("ceiling {}%{night}", crate::text::fmt_percent(c))
        });
        rows.push(format!(
            "{:<label_width$} │{row}│ {peak}, {ceiling}",
            series.window
        ));
    }
    rows.push(format!(
        "{:<label_width$} │{}│ {}",
        "runs",
        runs_row(&account.runs, since, until),
        if account.runs.is_empty() {
            "no Run"
        } else {
            "━ a Run, ✕ stopped by owl"
        }
    ));
    rows
}

/// The Runs as spans (`━`), a stop owl made as `✕` at its end.
fn runs_row(runs: &[RunReport], since: DateTime<Utc>, until: DateTime<Utc>) -> String {
    let mut cols = vec![' '; WIDTH];
    for r in runs {
        let end = r.ended_at.unwrap_or(until);
        let (a, b) = (
            column(r.started_at, since, until),
            column(end, since, until),
        );
        for c in cols.iter_mut().take(b + 1).skip(a) {
            *c = '━';
        }
        if r.stop.is_some() {
            cols[b] = '✕';
        }
    }
    cols.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::super::Point;
    use super::*;

    fn at(t: &str) -> DateTime<Utc> {
        crate::clock::parse(t).unwrap()
    }

    fn series(points: &[(&str, f64)]) -> WindowSeries {
        WindowSeries {
            window: "five_hour".into(),
            ceiling: Some(60.0),
            snapshots: points
                .iter()
                .map(|(t, p)| Point {
                    observed_at: at(t),
                    percent: *p,
                    source: crate::model::SnapshotSource::GetUsage,
                    run_id: Some(1),
                })
                .collect(),
            resets: Vec::new(),
        }
    }

    #[test]
    fn a_figure_holds_until_the_next_and_the_row_marks_the_ceiling() {
        let since = at("2026-11-30T00:00:00Z");
        let until = at("2026-11-30T04:00:00Z");
        // 48 columns over 4 hours: 5 minutes each.
        let s = series(&[
            ("2026-11-30T01:00:00Z", 40.0),
            ("2026-11-30T02:00:00Z", 70.0),
        ]);
        let cols = columns(&s, since, until);
        assert_eq!(cols[11], None);
        assert_eq!(cols[12], Some(40.0));
        assert_eq!(cols[23], Some(40.0));
        assert_eq!(cols[24], Some(70.0));
        assert_eq!(cols[47], Some(70.0));
        let account = AccountReport {
            name: "work".into(),
            windows: vec![s],
            owl_share: Vec::new(),
            night: None,
            by_hour: Vec::new(),
            runs: vec![RunReport {
                id: 1,
                job_id: "j".into(),
                account: "work".into(),
                outcome: Some("interrupted".into()),
                stop_reason: Some("ceiling".into()),
                stop: Some(crate::model::StopKind::Ceiling),
                started_at: at("2026-11-30T01:00:00Z"),
                ended_at: Some(at("2026-11-30T02:00:00Z")),
                cost_usd: None,
                note: None,
                check: None,
                check_said: None,
                machine: None,
            }],
        };
        let rows = account_rows(&account, since, until, false);
        let chart: Vec<char> = rows[0].split('│').nth(1).unwrap().chars().collect();
        assert_eq!(chart.len(), WIDTH);
        assert_eq!(chart[0], '·');
        assert_eq!(chart[12], '▄');
        assert_eq!(chart[24], '!', "over the ceiling, plainly");
        assert!(rows[0].ends_with("peak 70%, ceiling 60%"), "{}", rows[0]);
        let runs: Vec<char> = rows[1].split('│').nth(1).unwrap().chars().collect();
        assert_eq!(runs[12], '━');
        assert_eq!(runs[24], '✕');
        assert_eq!(runs[30], ' ');
        let coloured = account_rows(&account, since, until, true);
        let marked: String = [crate::output::RED, '▆', crate::output::PLAIN]
            .iter()
            .collect();
        assert!(coloured[0].contains(&marked));
    }
}
