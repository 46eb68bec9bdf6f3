//! A Job as `jobs --json` and `show --json` print it, and as `jobs` and `show` draw it.

use std::borrow::Cow;

use serde::Serialize;

use crate::model::Job;
use crate::store::ListedJob;

/// A Job as `jobs --json` and `show --json` print it (a stable shape, separate from the
/// row), borrowing the row's text: ten thousand Jobs are printed without copying them.
#[derive(Debug, Serialize)]
pub(crate) struct JobJson<'a> {
    pub(crate) id: &'a str,
    pub(crate) name: Option<&'a str>,
    pub(crate) state: &'static str,
    pub(crate) reason: Option<Cow<'a, str>>,
    pub(crate) repo: &'a str,
    pub(crate) base: &'a str,
    /// The commit `base` named when the Job was queued; the branch starts there.
    pub(crate) base_commit: Option<&'a str>,
    pub(crate) branch: Joined<'a>,
    /// The machine that runs it.
    pub(crate) machine: &'a str,
    /// Its worktree on this machine; `None` for a Job another machine runs (its worktree
    /// is in that machine's state dir).
    pub(crate) worktree: Option<Joined<'a>>,
    pub(crate) account: Option<&'a str>,
    pub(crate) priority: i64,
    pub(crate) not_before: Option<Cow<'a, str>>,
    /// How many Runs the Job has had (`runs` in `show --json` is the list of them).
    pub(crate) run_count: usize,
    /// How many of them count toward `max_runs`: a Run that was not the Job's doing (a
    /// ceiling, a missing login, an outage) does not.
    pub(crate) counted_runs: usize,
    pub(crate) max_runs: u32,
    pub(crate) created_at: Cow<'a, str>,
    pub(crate) updated_at: Cow<'a, str>,
    pub(crate) prompt: &'a str,
    /// The check its work must pass to be done; `null`: the agent's word decides.
    pub(crate) check: Option<CheckJson<'a>>,
    /// What its latest check found, if one ran.
    pub(crate) last_check: Option<CheckResultJson<'a>>,
    /// Done, and its check passed at the end: the work is verified, not only claimed.
    pub(crate) verified: bool,
    /// The Jobs it waits for (`add --after`): it runs once every one is done.
    pub(crate) after: Vec<String>,
    /// The Job whose branch tip it starts from (resolved at its first Run); null: `base`.
    pub(crate) base_after: Option<&'a str>,
    /// What the Job's Runs used of each Window, summed over them (owl's share).
    pub(crate) owl_share: Vec<ShareJson>,
}

/// What owl used of a Window: percentage points, and whether that is an upper bound (a
/// figure from before a Run was never seen).
#[derive(Debug, Serialize)]
pub(crate) struct ShareJson {
    pub(crate) window: String,
    /// The instance's reset (per Run); `null` in a Job's sum over its Runs.
    pub(crate) resets_at: Option<String>,
    pub(crate) points: f64,
    pub(crate) upper_bound: bool,
}

impl ShareJson {
    pub(crate) fn of_run(s: &crate::model::RunShare) -> ShareJson {
        ShareJson {
            window: s.window.clone(),
            resets_at: Some(crate::clock::rfc3339(s.resets_at)),
            points: crate::model::round_percent(s.points()),
            upper_bound: !s.baseline_known,
        }
    }

    /// A Job's shares summed per Window name, in the order first seen.
    pub(crate) fn summed(shares: &[crate::model::RunShare]) -> Vec<ShareJson> {
        crate::model::sum_by_window(shares)
            .into_iter()
            .map(|(window, points, known)| ShareJson {
                window,
                resets_at: None,
                points: crate::model::round_percent(points),
                upper_bound: !known,
            })
            .collect()
    }
}

/// A Job's check as `--json` prints it.
#[derive(Debug, Serialize)]
pub(crate) struct CheckJson<'a> {
    /// argv, never a shell string.
    pub(crate) command: &'a [String],
    pub(crate) timeout_secs: u64,
}

impl<'a> CheckJson<'a> {
    pub(crate) fn of(check: &'a crate::model::Check) -> CheckJson<'a> {
        CheckJson {
            command: &check.argv,
            timeout_secs: check.timeout_secs,
        }
    }
}

/// What one attempt of a check found, as `--json` prints it.
#[derive(Debug, Serialize)]
pub(crate) struct CheckResultJson<'a> {
    pub(crate) command: &'a [String],
    /// `passed`, `failed`, `timed_out`, `cannot_start` or `not_finished`.
    pub(crate) status: &'static str,
    pub(crate) exit_code: Option<i32>,
    pub(crate) duration_ms: u64,
    /// The commit it ran at; `null` for a check recorded before owl kept it.
    pub(crate) commit: Option<&'a str>,
}

impl<'a> CheckResultJson<'a> {
    pub(crate) fn of(record: &'a crate::model::CheckRecord) -> CheckResultJson<'a> {
        CheckResultJson {
            command: &record.command,
            status: record.status.as_str(),
            exit_code: record.exit_code,
            duration_ms: record.duration_ms,
            commit: record.commit.as_deref(),
        }
    }
}

/// Whether a Job in `state` whose latest check found `last` is verified done.
fn verified(state: crate::model::JobState, last: Option<&crate::model::CheckRecord>) -> bool {
    state == crate::model::JobState::Done && last.is_some_and(|c| c.passed())
}

impl<'a> JobJson<'a> {
    /// A Job read whole; `worktrees` is [`Ctx::worktrees_dir`] as text.
    pub(super) fn new(
        (worktrees, here): (&'a str, &'a str),
        job: &'a Job,
        runs: &'a [crate::model::Run],
    ) -> JobJson<'a> {
        let last_check = runs.iter().rev().find_map(|r| r.check.as_ref());
        let machine = job.machine.as_deref().unwrap_or(here);
        JobJson {
            id: &job.id,
            name: job.name.as_deref(),
            state: job.state.as_str(),
            reason: job.reason.as_ref().map(|r| r.to_string().into()),
            repo: &job.repo,
            base: &job.base,
            base_commit: job.base_commit.as_deref(),
            branch: Joined(crate::model::BRANCH_PREFIX, "", &job.id),
            machine,
            worktree: (machine == here).then_some(Joined(worktrees, "/", &job.id)),
            account: job.account.as_deref(),
            priority: job.priority,
            not_before: job.not_before.map(|t| crate::clock::rfc3339(t).into()),
            run_count: runs.len(),
            counted_runs: runs.iter().filter(|r| r.counts()).count(),
            max_runs: job.max_runs,
            created_at: crate::clock::rfc3339(job.created_at).into(),
            updated_at: crate::clock::rfc3339(job.updated_at).into(),
            prompt: &job.prompt,
            check: job.check.as_ref().map(CheckJson::of),
            last_check: last_check.map(CheckResultJson::of),
            verified: verified(job.state, last_check),
            after: job.after.clone(),
            base_after: job.base_after.as_deref(),
            owl_share: Vec::new(),
        }
    }

    /// A Job as listed, times printed as stored.
    pub(super) fn listed(
        (worktrees, here): (&'a str, &'a str),
        job: &'a ListedJob<'a>,
    ) -> JobJson<'a> {
        use crate::clock::printable;
        let machine = job.machine.unwrap_or(here);
        JobJson {
            id: job.id,
            name: job.name,
            state: job.state.as_str(),
            reason: job.reason.map(Cow::Borrowed),
            repo: job.repo,
            base: job.base,
            base_commit: job.base_commit,
            branch: Joined(crate::model::BRANCH_PREFIX, "", job.id),
            machine,
            worktree: (machine == here).then_some(Joined(worktrees, "/", job.id)),
            account: job.account,
            priority: job.priority,
            not_before: job.not_before.map(printable),
            run_count: job.run_count,
            counted_runs: job.counted_runs,
            max_runs: job.max_runs,
            created_at: printable(job.created_at),
            updated_at: printable(job.updated_at),
            prompt: job.prompt,
            check: job.check.as_ref().map(CheckJson::of),
            last_check: job.last_check.as_ref().map(CheckResultJson::of),
            verified: verified(job.state, job.last_check.as_ref()),
            after: job.after.clone(),
            base_after: job.base_after,
            owl_share: Vec::new(),
        }
    }
}

impl JobJson<'_> {
    /// With the Job's shares of the Windows, summed per Window.
    pub(crate) fn with_shares(mut self, shares: &[crate::model::RunShare]) -> Self {
        self.owl_share = ShareJson::summed(shares);
        self
    }

    /// `1/5`, or with Runs that did not count `0/5 counted, 1 not counted`: `maxRuns`
    /// counts only the Job's own Runs, and so does the first figure.
    pub(crate) fn runs_text(&self) -> String {
        match self.run_count.saturating_sub(self.counted_runs) {
            0 => format!("{}/{}", self.counted_runs, self.max_runs),
            n => format!(
                "{}/{} counted, {n} not counted",
                self.counted_runs, self.max_runs
            ),
        }
    }
}

/// Three pieces of text printed as one string, built only as it is written.
#[derive(Debug)]
pub(crate) struct Joined<'a>(&'a str, &'a str, &'a str);

impl std::fmt::Display for Joined<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)?;
        f.write_str(self.1)?;
        f.write_str(self.2)
    }
}

impl Serialize for Joined<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Put together on the stack: formatting machinery costs more than the copy.
        let mut buf = [0u8; 512];
        let parts = [self.0, self.1, self.2];
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > buf.len() {
            return s.collect_str(self);
        }
        let mut at = 0;
        for part in parts {
            buf[at..at + part.len()].copy_from_slice(part.as_bytes());
            at += part.len();
        }
        // Whole UTF-8 strings one after another are UTF-8.
        s.serialize_str(std::str::from_utf8(&buf[..len]).unwrap_or_default())
    }
}
