//! Money: what a Run may spend, and whether a Job has any left (pure functions of the Job and what its Runs cost).

use crate::model::{Job, JobReason};

/// Why the Job may not start another Run for lack of budget, if so; `spent` is what its
/// Runs cost so far.
pub(crate) fn job_budget_spent(job: &Job, spent: f64) -> Option<JobReason> {
    let budget = job.max_job_budget_usd?;
    (spent >= budget).then_some(JobReason::BudgetSpent {
        spent: Some(spent),
        budget: Some(budget),
    })
}

/// The Run's `--max-budget-usd`: the smaller of the per-Run cap and what the Job has left.
pub(crate) fn run_budget(job: &Job, spent: f64) -> Option<f64> {
    // Rounded to a millionth of a dollar so float noise never reaches the CLI's argv;
    // never 0, which the CLI refuses (a Job with nothing left is not started at all).
    let left = job
        .max_job_budget_usd
        .map(|b| (((b - spent) * 1e6).round() / 1e6).max(1e-6));
    match (job.max_budget_usd, left) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// What the Job has left after this Run, when it has a budget across Runs.
pub(crate) fn job_budget_left(job: &Job, spent_before: f64, this_run: f64) -> Option<f64> {
    job.max_job_budget_usd.map(|b| b - spent_before - this_run)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(max_budget_usd: Option<f64>, max_job_budget_usd: Option<f64>) -> Job {
        Job {
            max_budget_usd,
            max_job_budget_usd,
            ..Job::default()
        }
    }

    #[test]
    fn a_run_gets_the_smaller_of_its_cap_and_what_the_job_has_left() {
        assert_eq!(run_budget(&job(Some(2.0), Some(5.0)), 4.0), Some(1.0));
        assert_eq!(run_budget(&job(Some(2.0), Some(5.0)), 1.0), Some(2.0));
        assert_eq!(run_budget(&job(None, Some(5.0)), 1.5), Some(3.5));
        assert_eq!(run_budget(&job(Some(2.0), None), 9.0), Some(2.0));
        assert_eq!(run_budget(&job(None, None), 9.0), None);
        // Float noise never reaches the CLI's argv, and 0 (which it refuses) never does.
        assert_eq!(run_budget(&job(None, Some(0.3)), 0.1 + 0.1), Some(0.1));
        assert_eq!(run_budget(&job(None, Some(1.0)), 1.0), Some(1e-6));
    }

    #[test]
    fn a_job_whose_runs_spent_its_budget_says_so() {
        let spent = job_budget_spent(&job(None, Some(5.0)), 5.0).unwrap();
        assert_eq!(spent.to_string(), "job budget spent: $5.00 of $5.00");
        assert_eq!(job_budget_spent(&job(None, Some(5.0)), 4.99), None);
        assert_eq!(job_budget_spent(&job(Some(1.0), None), 100.0), None);
        assert_eq!(job_budget_left(&job(None, Some(5.0)), 1.0, 0.5), Some(3.5));
    }
}
