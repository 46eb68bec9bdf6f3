//! The values config.yaml leaves to owl: each default a key takes when it is not written.

use std::time::Duration;

/// How often an idle tick in the user's day reads an Account's utilization (`sampleEvery`).
pub(super) const DEFAULT_SAMPLE_EVERY: Duration = Duration::from_secs(30 * 60);

/// How long the user's use by hour is kept (`userUseRetention`): eight weeks.
pub(super) const USER_USE_RETENTION: Duration = Duration::from_secs(56 * 86_400);

/// How long utilization figures are kept (`snapshotRetention`).
pub(super) const SNAPSHOT_RETENTION: Duration = Duration::from_secs(35 * 86_400);

/// How long a check may run unless config.yaml says otherwise.
pub(super) const DEFAULT_CHECK_TIMEOUT: Duration = Duration::from_secs(30 * 60);
