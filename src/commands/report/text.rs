//! The report as text: each Job, then each Account's chart, owl's share and the hours of use.

use chrono::{DateTime, Local, Utc};

use super::{AccountShare, JobReport, Report};

/// One Job of the report as text: its state, branch, cost, Runs and next step.
fn print_job(job: &JobReport) {
    outln!();
    let name = job
        .name
        .as_deref()
        .filter(|n| *n != job.id)
        .map(|n| format!(" ({n})"))
        .unwrap_or_default();
    let reason = job
        .reason
        .as_deref()
        .map(|r| format!(" — {r}"))
        .unwrap_or_default();
    let verified = if job.verified { " (verified)" } else { "" };
    outln!("Job {}{name}: {}{verified}{reason}", job.id, job.state);
    if let Some(check) = &job.check {
        outln!("  check: {}", crate::model::command_line(check));
    }
    if !job.after.is_empty() {
        outln!("  after: {}", job.after.join(", "));
    }
    if let Some(used) = &job.owl_share_said {
        outln!("  owl's share: {used}");
    }
    if let Some(commits) = job.commits {
        outln!(
            "  {}: {commits} commit{}, {} file{} changed, +{} -{}",
            job.branch,
            if commits == 1 { "" } else { "s" },
            job.files_changed.unwrap_or(0),
            if job.files_changed == Some(1) {
                ""
            } else {
                "s"
            },
            job.insertions.unwrap_or(0),
            job.deletions.unwrap_or(0)
        );
    }
    let left = job
        .budget_left_usd
        .map(|b| format!(", ${b:.2} of its budget left"))
        .unwrap_or_default();
    outln!("  cost ${:.2}{left}", job.cost_usd);
    for r in &job.runs {
        let outcome = r.outcome.as_deref().unwrap_or("running");
        let why = r
            .stop_reason
            .as_deref()
            .map(|s| format!(" ({s})"))
            .unwrap_or_default();
        outln!(
            "  run {} on {} at {}: {outcome}{why}",
            r.id,
            r.account,
            local_hm(r.started_at)
        );
        if let Some(note) = &r.note {
            outln!("    note: {note}");
        }
        if let Some(said) = &r.check_said {
            outln!("    check: {said}");
        }
    }
    for d in &job.denied_tools {
        outln!("  denied: {} {}", d.tool_name, d.detail);
    }
    match &job.next_step {
        Some(next) => outln!("  next: {next}"),
        None => outln!("  next: none (no Handoff yet)"),
    }
}

pub(super) fn print_text(report: &Report) {
    let colour = crate::output::colour();
    let (since, until) =
        crate::clock::span_ends(report.since, report.until, &chrono::Local, "%a %H:%M");
    outln!("owl report: {since} → {until}");
    outln!("{}", report.summary);
    for job in &report.jobs {
        print_job(job);
    }
    for account in &report.accounts {
        outln!();
        outln!("Account {}", account.name);
        for line in super::chart::account_rows(account, report.since, report.until, colour) {
            outln!("  {line}");
        }
        for share in &account.owl_share {
            outln!("  {}", share_said(share));
        }
        if !account.by_hour.is_empty() {
            outln!("  your use and owl's of the week by hour:");
            for line in super::by_hour::said(&account.by_hour, &Local) {
                outln!("    {line}");
            }
        }
    }
}

/// "owl used 18 pp of seven_day, the rest (29 pp) was yours".
pub(super) fn share_said(s: &AccountShare) -> String {
    let pct = crate::text::fmt_percent;
    let rest = (s.percent - s.points).max(0.0);
    match s.upper_bound {
        false => format!(
            "owl used {} pp of {}, the rest ({} pp) was yours",
            pct(s.points),
            s.window,
            pct(rest)
        ),
        true => format!(
            "owl used at most {} pp of {}, at least {} pp was yours",
            pct(s.points),
            s.window,
            pct(rest)
        ),
    }
}

/// A time as the reader's clock shows it: `Mon 22:05`.
fn local_hm(t: DateTime<Utc>) -> String {
    t.with_timezone(&Local).format("%a %H:%M").to_string()
}
