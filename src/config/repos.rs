//! Per-repository defaults (`repos.<path>`): the check a repository's Jobs get, and its timeout, unless `owl add` says otherwise.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use super::units::ser_opt_duration;
use super::Config;

/// What one repository's Jobs get unless `owl add` overrides it: `repos.<path>`.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RepoDefaults {
    pub(crate) check: Option<Vec<String>>,
    #[serde(serialize_with = "ser_opt_duration")]
    pub(crate) check_timeout: Option<Duration>,
}

impl Config {
    /// The check a Job in `repo` gets unless `owl add` says otherwise: its repository's,
    /// else `defaults.check`; with its timeout, likewise.
    pub(crate) fn default_check(&self, repo: &Path) -> Option<crate::model::Check> {
        let own = self.repos.get(repo);
        let argv = own
            .and_then(|r| r.check.clone())
            .or_else(|| self.defaults.check.clone())?;
        Some(crate::model::Check {
            argv,
            timeout_secs: self.check_timeout(repo).as_secs(),
        })
    }

    /// How long a check of a Job in `repo` may run.
    pub(crate) fn check_timeout(&self, repo: &Path) -> Duration {
        self.repos
            .get(repo)
            .and_then(|r| r.check_timeout)
            .unwrap_or(self.defaults.check_timeout)
    }
}
