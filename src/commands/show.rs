//! `owl show`: one Job's whole story: its state, branch, worktree, Handoff and every Run.

use anyhow::Result;
use serde::Serialize;

use super::job_json::ShareJson;
use super::{opt_time, print_json, Ctx, JobJson};
use crate::clock::{human, rfc3339};
use crate::model::{PermissionDenial, Run};
use crate::workspace::BranchSummary;

#[derive(Debug, Serialize)]
struct ShowJson<'a> {
    #[serde(flatten)]
    job: JobJson<'a>,
    handoff: Option<String>,
    /// The worktree is the Job's own clone (a sandboxed Run's), not a worktree of the
    /// repository; its branch is brought into the repository after each Run.
    own_clone: bool,
    /// Where an unfinished Job stands in the plan now, in the words of `status`: why it
    /// does not run (its Account's login, a ceiling, a back-off, the schedule window), or
    /// that the next tick runs it; `null` for a finished Job.
    now: Option<String>,
    commits: Option<usize>,
    files_changed: Option<usize>,
    insertions: Option<usize>,
    deletions: Option<usize>,
    /// The agent CLIs' settings files the branch changed since its base: no Run's CLI read
    /// them (README: Sandbox).
    settings_changed: Vec<String>,
    /// More hosts its sandboxed Runs may reach (`add --allow-host`).
    allow_hosts: &'a [String],
    /// What all the Job's Runs cost together, and its caps.
    cost_usd: f64,
    max_budget_usd: Option<f64>,
    max_job_budget_usd: Option<f64>,
    runs: Vec<RunJson>,
}

#[derive(Debug, Serialize)]
struct RunJson {
    id: i64,
    account: String,
    outcome: Option<String>,
    stop_reason: Option<String>,
    /// Who the Run is charged to (`job`, `not_logged_in`, `outage`, `rate_limited`,
    /// `disk_full`, `stopped`); only `job` counts toward `maxRuns`.
    cause: Option<crate::model::Cause>,
    /// Whether the Run counts toward the Job's `maxRuns`.
    counts: bool,
    /// Why owl stopped it (`ceiling`, `extra_usage`, …), or null when it ended by itself.
    stop: Option<crate::model::StopKind>,
    /// Something that happened after the result line.
    note: Option<String>,
    exit_code: Option<i32>,
    session_id: Option<String>,
    cost_usd: Option<f64>,
    /// The Run's `--max-budget-usd`; without a result line it counts as spent.
    budget_usd: Option<f64>,
    /// `$0.12`, or `unknown (≤ $0.50)` for a Run that left no result line.
    cost: String,
    num_turns: Option<i64>,
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
    api_retries: i64,
    agent_version: Option<String>,
    started_at: String,
    ended_at: Option<String>,
    duration_secs: Option<i64>,
    permission_denials: Vec<PermissionDenial>,
    /// What owl cannot see of a Run on this Account's Driver (what `permission_denials`
    /// may miss); `null` when its output tells everything.
    blind_spots: Option<&'static str>,
    /// Processes left alive after the agent exited, killed by owl.
    survivors_killed: Option<i64>,
    /// stdout lines logged but not understood.
    skipped_lines: Option<i64>,
    /// Commits the Run added to the branch (owl's safety-net commit included).
    commits: Option<usize>,
    /// owl's commit of what the Run left uncommitted.
    safety_commit: Option<String>,
    log: String,
    /// The Job's check after the Run, when the agent said done and the Job has one.
    check: Option<RunCheckJson>,
    /// What the Run used of each Window instance it saw (owl's share).
    owl_share: Vec<ShareJson>,
    /// The same in words: "used 7 pp of five_hour".
    #[serde(skip)]
    owl_share_said: Option<String>,
    /// The machine that ran it.
    machine: String,
    /// What happened to it after its outcome was recorded (a supervisor's own finding
    /// about a Run another machine recorded lost first), oldest first.
    events: Vec<EventJson>,
}

/// Something that happened to a Run after its outcome.
#[derive(Debug, Serialize)]
struct EventJson {
    at: String,
    machine: Option<String>,
    text: String,
}

/// What a Run's check found, with where its output is.
#[derive(Debug, Serialize)]
struct RunCheckJson {
    command: Vec<String>,
    /// `passed`, `failed`, `timed_out`, `cannot_start` or `not_finished`.
    status: &'static str,
    exit_code: Option<i32>,
    duration_ms: u64,
    /// The commit it ran at; `null` for a check recorded before owl kept it.
    commit: Option<String>,
    /// Its stdout and stderr, interleaved (`owl logs RUN --check` prints it).
    log: String,
    /// How it ended, in words.
    #[serde(skip)]
    said: String,
}

/// What `owl show` was asked.
#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    /// The Job's id.
    job: String,
    /// Print as JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(ctx: &Ctx, args: &ShowArgs) -> Result<u8> {
    let (id, json) = (args.job.as_str(), args.json);
    let Some(store) = ctx.read_store()? else {
        crate::bad_input!("no job '{id}': no jobs have been added yet");
    };
    let job = ctx.job(&store, id)?;
    let runs = store.runs_of(&job.id)?;
    let shares = store.job_shares(&job.id)?;
    let mut events = store.job_run_events(&job.id)?;
    let shown = Shown {
        handoff: crate::workspace::read_handoff(&job).unwrap_or(None),
        summary: crate::workspace::branch_summary(&job, &runs).unwrap_or(None),
        run_rows: runs
            .iter()
            .map(|r| {
                let mine: Vec<_> = shares.iter().filter(|s| s.run_id == r.id).collect();
                let mut row = run_json(ctx, r);
                row.owl_share = mine.iter().map(|s| ShareJson::of_run(s)).collect();
                row.owl_share_said = crate::model::describe_shares(mine);
                row.events = events
                    .extract_if(.., |(run_id, _)| *run_id == r.id)
                    .map(|(_, (at, machine, text))| EventJson { at, machine, text })
                    .collect();
                row
            })
            .collect(),
        shares,
        now: standing_now(ctx, &store, &job)?,
        own_clone: ctx
            .config
            .state()
            .worktree(&job.id)
            .join(".git")
            .symlink_metadata()
            .is_ok_and(|m| m.is_dir()),
        job,
        runs,
    };
    if json {
        print_shown_json(ctx, shown)?;
    } else {
        print_shown(ctx, &shown);
    }
    Ok(0)
}

/// A Job as `show` tells it: its row and Runs, and what git and the plan say of it now.
struct Shown {
    job: crate::model::Job,
    runs: Vec<crate::model::Run>,
    handoff: Option<String>,
    summary: Option<BranchSummary>,
    run_rows: Vec<RunJson>,
    /// What every Run used of each Window instance.
    shares: Vec<crate::model::RunShare>,
    now: Option<String>,
    own_clone: bool,
}

fn print_shown_json(ctx: &Ctx, shown: Shown) -> Result<()> {
    let worktrees = ctx.worktrees_text();
    let s = shown.summary.clone().unwrap_or_default();
    let has = shown.summary.is_some();
    let job = &shown.job;
    print_json(&ShowJson {
        job: JobJson::new((&worktrees, &ctx.config.machine), job, &shown.runs)
            .with_shares(&shown.shares),
        handoff: shown.handoff,
        own_clone: shown.own_clone,
        now: shown.now,
        commits: has.then_some(s.commits),
        files_changed: has.then_some(s.files_changed),
        insertions: has.then_some(s.insertions),
        deletions: has.then_some(s.deletions),
        settings_changed: s.settings_changed,
        allow_hosts: &job.allow_hosts,
        cost_usd: crate::model::total_cost(&shown.runs),
        max_budget_usd: job.max_budget_usd,
        max_job_budget_usd: job.max_job_budget_usd,
        runs: shown.run_rows,
    })
}

fn print_shown(ctx: &Ctx, shown: &Shown) {
    let worktrees = ctx.worktrees_text();
    let Shown {
        job,
        runs,
        handoff,
        summary,
        run_rows,
        shares,
        now,
        own_clone,
    } = shown;
    let own_clone = *own_clone;
    let j = JobJson::new((&worktrees, &ctx.config.machine), job, runs);
    outln!(
        "Job {}{}",
        j.id,
        j.name
            .filter(|n| *n != j.id)
            .map(|n| format!(" ({n})"))
            .unwrap_or_default()
    );
    // Each thing once: where the Job stands now says its reason and its wait, when it does.
    let said_now = |text: &str| now.as_deref().is_some_and(|n| n.contains(text));
    outln!(
        "  state:    {}{}",
        j.state,
        j.reason
            .as_ref()
            .filter(|r| !said_now(r))
            .map(|r| format!(" — {r}"))
            .unwrap_or_default()
    );
    if let Some(now) = &now {
        outln!("  now:      {now}");
    }
    if let Some(t) = j.not_before.as_ref().filter(|_| !said_now("waits until")) {
        outln!("  waits until {t}");
    }
    print_base(&j, summary.is_none());
    outln!(
        "  branch:   {}{}",
        j.branch,
        describe_summary(summary.as_ref(), &job.repo, runs.len())
    );
    for path in summary.iter().flat_map(|s| &s.settings_changed) {
        outln!("            {}", crate::agent_settings::not_applied(path));
    }
    match &j.worktree {
        None => outln!(
            "  worktree: on machine {}, which runs it (`owl show {}` there)",
            j.machine,
            j.id
        ),
        Some(worktree) if own_clone => outln!(
            "  worktree: {worktree} (the Job's own clone: a sandboxed Run works there, and its \
             branch is brought into the repository after each Run)"
        ),
        Some(worktree) => outln!("  worktree: {worktree}"),
    }
    outln!(
        "  account:  {}; priority {}; runs {}",
        j.account.unwrap_or("any"),
        j.priority,
        j.runs_text()
    );
    if let Some(used) = crate::model::describe_shares(shares) {
        outln!("  owl's share: {used}");
    }
    print_check(&j, runs);
    outln!(
        "  prompt:   {}",
        crate::text::truncate(j.prompt.trim(), 200).replace('\n', "\n            ")
    );
    outln!();
    print_handoff_and_runs(ctx, handoff.as_deref(), run_rows);
}

/// Where the Job's branch starts, and the Jobs it waits for. A stacked Job whose branch is
/// not made yet starts where the Job it waits for ends.
fn print_base(j: &JobJson, unmade: bool) {
    match (j.base_after, j.base_commit) {
        (Some(dep), _) if unmade => outln!(
            "  repo:     {} (base: where job {dep} ends, its branch's tip at this Job's first Run)",
            j.repo
        ),
        // The commit `base` named at `add` is where the branch starts; the ref may have moved.
        (_, Some(commit)) => outln!(
            "  repo:     {} (base {} at {})",
            j.repo,
            j.base,
            &commit[..commit.len().min(12)]
        ),
        (_, None) => outln!("  repo:     {} (base {})", j.repo, j.base),
    }
    if !j.after.is_empty() {
        outln!("  after:    {}", j.after.join(", "));
    }
}

/// The Job's check: verified, what it is, or none.
fn print_check(j: &JobJson, runs: &[Run]) {
    match (&j.check, j.verified) {
        (_, true) => outln!(
            "  check:    verified: {}",
            runs.iter()
                .rev()
                .find_map(|r| r.check.as_ref())
                .map(|c| c.to_string())
                .unwrap_or_default()
        ),
        (Some(check), false) => {
            outln!(
                "  check:    {} (timeout {}; decides when the agent says done)",
                crate::model::command_line(check.command),
                crate::config::format_duration(std::time::Duration::from_secs(check.timeout_secs))
            );
        }
        (None, false) => outln!("  check:    none: the agent's word decides"),
    }
    if let Some(program) = j.check.as_ref().and_then(|c| c.command.first()) {
        outln!(
            "            {}",
            crate::config::check_program_place(program)
        );
    }
}

/// The Handoff at the branch head, then each Run.
fn print_handoff_and_runs(ctx: &Ctx, handoff: Option<&str>, run_rows: &[RunJson]) {
    match handoff {
        Some(h) => {
            outln!("Handoff (.owl/handoff.md at the branch head):");
            for line in h.lines() {
                outln!("  | {line}");
            }
        }
        None => outln!("Handoff: none yet"),
    }
    outln!();
    if run_rows.is_empty() {
        outln!("Runs: none yet");
    }
    for r in run_rows {
        print_run(ctx, r);
    }
}

/// What the branch holds beyond its base; without a summary, why: the repository is gone
/// (the Runs' commits below are as recorded when they ended), the branch is (Runs made it),
/// or no Run made it yet.
fn describe_summary(s: Option<&BranchSummary>, repo: &str, runs: usize) -> String {
    match s {
        Some(s) if s.commits > 0 => format!(
            " — {} commit{} beyond the base, {} file{} changed, +{} -{}",
            s.commits,
            if s.commits == 1 { "" } else { "s" },
            s.files_changed,
            if s.files_changed == 1 { "" } else { "s" },
            s.insertions,
            s.deletions
        ),
        Some(_) => " — no commits beyond the base yet".into(),
        None if !std::path::Path::new(repo).is_dir() => {
            " — its repository is not there; each Run's commits are as recorded when it ended"
                .into()
        }
        None if runs > 0 => " — not in the repository".into(),
        None => " — not created yet".into(),
    }
}

/// A Run's first lines: where and how it ended, why, and what happened to it afterwards.
fn print_run_head(ctx: &Ctx, r: &RunJson) {
    let outcome = r.outcome.as_deref().unwrap_or("running");
    let duration = r
        .duration_secs
        .map(|s| human(chrono::Duration::seconds(s)))
        .unwrap_or_else(|| "-".into());
    let cost = match r.cost_usd {
        Some(c) => format!("${c:.4}"),
        None if r.outcome.is_some() => r.cost.clone(),
        None => "-".into(),
    };
    let elsewhere = match r.machine == ctx.config.machine {
        true => String::new(),
        false => format!(" (machine {})", r.machine),
    };
    outln!(
        "Run {} on {}{elsewhere}: {outcome}, {duration}, {cost}, started {}",
        r.id,
        r.account,
        r.started_at
    );
    if let Some(reason) = &r.stop_reason {
        outln!("  reason: {reason}");
    }
    for e in &r.events {
        let on = e
            .machine
            .as_deref()
            .map(|m| format!(", machine {m}"))
            .unwrap_or_default();
        outln!("  afterwards ({}{on}): {}", e.at, e.text);
    }
}

fn print_run(ctx: &Ctx, r: &RunJson) {
    print_run_head(ctx, r);
    if let Some(used) = &r.owl_share_said {
        outln!("  {used}");
    }
    if r.outcome.is_some() && !r.counts {
        outln!("  not counted toward maxRuns: not the Job's doing");
    }
    if let Some(note) = &r.note {
        outln!("  note: {note}");
    }
    if let Some(s) = &r.session_id {
        // The session lives in the Account's credential store: the hint names it.
        // A session id is the agent's word: offered as a command only in the CLI's shape.
        let resume =
            ctx.config.accounts.get(&r.account).and_then(|account| {
                crate::driver::for_kind(account.driver).resume_command(account, s)
            });
        let there =
            (r.machine != ctx.config.machine).then(|| format!("on machine {}, ", r.machine));
        match resume {
            Some(resume) => outln!(
                "  session: {s} ({}in the worktree: {resume})",
                there.unwrap_or_default()
            ),
            None => outln!("  session: {}", crate::text::shell_quote(s)),
        }
    }
    if r.api_retries > 0 {
        outln!("  API retries: {}", r.api_retries);
    }
    match (r.commits, &r.safety_commit) {
        (Some(n), Some(c)) => outln!(
            "  commits: {n}, including owl's commit {} of what the Run left uncommitted",
            &c[..c.len().min(10)]
        ),
        (Some(n), None) => outln!("  commits: {n}"),
        _ => {}
    }
    if let Some(n) = r.survivors_killed.filter(|n| *n > 0) {
        outln!("  left behind: {n} process(es), killed by owl");
    }
    if let Some(n) = r.skipped_lines.filter(|n| *n > 0) {
        outln!("  unreadable output: {n} line(s) logged but not understood");
    }
    if !r.permission_denials.is_empty() {
        outln!(
            "  denied tools ({}): the agent's permissions refused these calls:",
            r.permission_denials.len()
        );
        for d in &r.permission_denials {
            outln!("    - {} {}", d.tool_name, d.detail);
        }
    }
    if let Some(blind) = r.blind_spots {
        outln!("  not seen: {blind}");
    }
    if let Some(check) = &r.check {
        outln!("  check: {} (owl logs {} --check)", check.said, r.id);
    }
    match r.machine == ctx.config.machine {
        true => outln!("  log: {}", r.log),
        false => outln!(
            "  log: on machine {} (`owl logs {}` there)",
            r.machine,
            r.id
        ),
    }
}

fn run_json(ctx: &Ctx, r: &Run) -> RunJson {
    RunJson {
        machine: r
            .machine
            .clone()
            .unwrap_or_else(|| ctx.config.machine.clone()),
        events: Vec::new(),
        id: r.id,
        account: r.account.clone(),
        outcome: r.outcome.map(|o| o.to_string()),
        stop_reason: r.stop_reason.clone(),
        cause: r.cause,
        counts: r.counts(),
        stop: r.stop,
        note: r.note.clone(),
        exit_code: r.exit_code,
        session_id: r.session_id.clone(),
        cost_usd: r.cost_usd,
        budget_usd: r.budget_usd,
        cost: r.describe_cost(),
        num_turns: r.num_turns,
        input_tokens: r.input_tokens,
        output_tokens: r.output_tokens,
        api_retries: r.api_retries,
        agent_version: r.agent_version.clone(),
        started_at: rfc3339(r.started_at),
        ended_at: opt_time(r.ended_at),
        duration_secs: r.ended_at.map(|e| (e - r.started_at).num_seconds().max(0)),
        permission_denials: r.permission_denials.clone(),
        blind_spots: ctx
            .config
            .accounts
            .get(&r.account)
            .and_then(|a| crate::driver::for_kind(a.driver).blind_spots()),
        survivors_killed: r.survivors_killed,
        skipped_lines: r.skipped_lines,
        commits: r.commits.map(|n| n.max(0) as usize),
        safety_commit: r.safety_commit.clone(),
        check: r.check.as_ref().map(|c| RunCheckJson {
            command: c.command.clone(),
            status: c.status.as_str(),
            exit_code: c.exit_code,
            duration_ms: c.duration_ms,
            commit: c.commit.clone(),
            log: ctx
                .config
                .state()
                .run_check_log(&r.job_id, r.id)
                .display()
                .to_string(),
            said: c.to_string(),
        }),
        owl_share: Vec::new(),
        owl_share_said: None,
        log: ctx
            .config
            .state()
            .run_log(&r.job_id, r.id)
            .display()
            .to_string(),
    }
}

/// Where an unfinished Job stands in the plan now, as `status` tells it.
fn standing_now(
    ctx: &Ctx,
    store: &crate::store::Store,
    job: &crate::model::Job,
) -> Result<Option<String>> {
    use crate::model::JobState;
    if !matches!(
        job.state,
        JobState::Queued | JobState::Waiting | JobState::Running
    ) {
        return Ok(None);
    }
    let (_, plan) = super::plan::make_plan(ctx, store, crate::clock::now()?)?;
    let Some(entry) = plan.queue.iter().find(|q| q.job_id == job.id) else {
        return Ok(None);
    };
    Ok(Some(match (&plan.decision, plan.waits_because(&job.id)) {
        (crate::schedule::Decision::Run { job_id, account }, _) if *job_id == job.id => {
            format!("the next tick runs it on {account}")
        }
        // The queue's own words for it, as `status` prints them (one place decides them).
        _ if entry.eligible => entry.reason.clone(),
        (_, Some(why)) => why.to_string(),
        (crate::schedule::Decision::Idle { reason }, None) => reason.clone(),
        (_, None) => String::new(),
    }))
}
