//! What the metrics file counts from the store: Jobs by state, and ended Runs by Account and outcome (counters that survive restarts because they are the history's own).

use anyhow::Result;

use super::engine::params;
use super::Store;

impl Store {
    /// Every Job, counted by state.
    pub(crate) fn jobs_by_state(&self) -> Result<Vec<(String, i64)>> {
        self.db.query_map(
            "SELECT state, COUNT(*) FROM jobs GROUP BY state ORDER BY state",
            params![],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    }

    /// Every ended Run, counted by Account and outcome.
    pub(crate) fn runs_by_outcome(&self) -> Result<Vec<(String, String, i64)>> {
        self.db.query_map(
            "SELECT account, outcome, COUNT(*) FROM runs WHERE outcome IS NOT NULL \
             GROUP BY account, outcome ORDER BY account, outcome",
            params![],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
    }
}
