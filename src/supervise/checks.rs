//! What owl asks the agent CLI about itself outside a Run, through the Account's Executor: its version against the tested range, and its login as it tells it without a turn.

use super::process::{Executor, Oneshot};
use crate::config::Account;
use crate::driver::{self, AgentCliError, Driver, Invocation, Login};

/// How long `--version` may take before owl calls the agent CLI broken.
const VERSION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// Runs the agent CLI's version command and checks it against the tested range.
pub(crate) fn check_agent(
    executor: &dyn Executor,
    driver: &dyn Driver,
    command: &std::path::Path,
    account: &Account,
) -> Result<String, AgentCliError> {
    // Found first: a bare name not on PATH (cron's) gets the fix, not "os error 2".
    driver::locate(command, &account.driver.command_key())?;
    let inv = driver.version_invocation(command, account);
    let out = output_of(executor, &inv, VERSION_TIMEOUT).map_err(|e| match e {
        None => AgentCliError::NoAnswer(command.to_path_buf()),
        Some(error) => AgentCliError::CannotRun {
            command: command.to_path_buf(),
            error,
        },
    })?;
    driver.check_version(&String::from_utf8_lossy(&out))
}

/// How long the CLI's own login answer may take (`claude auth status`: about 0.3 s, local).
/// A bound for a CLI that hangs: 2.1.197 takes 1.8 s, and a loaded machine much longer.
const LOGIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The Account's login as the CLI itself tells it without a turn, where its version can
/// (`None`: it cannot, or its answer was not one owl reads; the probe then decides).
pub(crate) fn check_login(
    executor: &dyn Executor,
    driver: &dyn Driver,
    command: &std::path::Path,
    account: &Account,
) -> Option<Login> {
    let inv = driver.login_invocation(command, account)?;
    let out = output_of(executor, &inv, LOGIN_TIMEOUT).ok()?;
    driver.parse_login(&String::from_utf8_lossy(&out))
}

/// The most of a version or login answer owl reads: a few lines are expected.
const ANSWER_CAP: usize = 64 * 1024;

/// Runs a short command to its end: its stdout, or why not (`None`: no answer in time, and
/// it was killed with its process group). Waited on, not polled: the answer is read the
/// moment it exits, whatever it left holding its stdout.
fn output_of(
    executor: &dyn Executor,
    inv: &Invocation,
    timeout: std::time::Duration,
) -> Result<Vec<u8>, Option<String>> {
    let call = Oneshot {
        invocation: inv,
        cwd: None,
        input: None,
        timeout,
        cap: ANSWER_CAP,
    };
    match executor.oneshot(call) {
        Ok(ended) => Ok(ended.stdout),
        Err(crate::oneshot::Failed::TimedOut { .. }) => Err(None),
        Err(e) => Err(Some(e.to_string())),
    }
}
