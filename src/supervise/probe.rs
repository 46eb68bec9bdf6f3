//! The zero-token probe: starts the agent with an Account's environment only to ask for its utilization.

use std::io::Write;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::process::{Executor, HandleId, RunHandle};
use crate::config::Account;
use crate::driver::{AgentEvent, Driver, Invocation, Usage};
use crate::usage::{ProbeOutcome, PROBE_TIMEOUT};
use crate::wait::Waited;

/// How long owl waits for a connection to the API (or its proxy) to be taken.
const REACH_TIMEOUT: Duration = Duration::from_secs(3);

/// Starts the agent with the Account's environment through its Executor, asks only for
/// its utilization, and stops it. No prompt is written, so no tokens are spent.
pub(crate) fn probe(
    executor: &dyn Executor,
    driver: &dyn Driver,
    command: &Path,
    account: &Account,
    cwd: &Path,
) -> ProbeOutcome {
    match start(executor, driver, command, account, cwd) {
        Ok(started) => ask(executor, driver, started),
        Err(failed) => failed,
    }
}

/// A probe asked: the CLI running, its request written.
pub(crate) struct Started {
    pub(crate) id: HandleId,
    handle: RunHandle,
    invocation: Invocation,
}

/// Starts the probe and writes its request; what went wrong, as the probe's outcome.
pub(crate) fn start(
    executor: &dyn Executor,
    driver: &dyn Driver,
    command: &Path,
    account: &Account,
    cwd: &Path,
) -> Result<Started, ProbeOutcome> {
    let Some(invocation) = driver.probe_invocation(command, account) else {
        return Err(ProbeOutcome::Failed(
            "the driver has no zero-token probe for this login".into(),
        ));
    };
    start_invocation(executor, driver, invocation, cwd)
}

/// The probe of `invocation`, whatever the Driver would say of the login: the conformance
/// check asks the CLI what owl concluded from (Codex's app-server with an API key).
pub(crate) fn probe_with(
    executor: &dyn Executor,
    driver: &dyn Driver,
    invocation: &Invocation,
    cwd: &Path,
) -> ProbeOutcome {
    match start_invocation(executor, driver, invocation.clone(), cwd) {
        Ok(started) => ask(executor, driver, started),
        Err(failed) => failed,
    }
}

/// The started probe's answer; whatever it started in its group goes with it.
fn ask(executor: &dyn Executor, driver: &dyn Driver, started: Started) -> ProbeOutcome {
    let id = started.id;
    let outcome = answer(driver, started);
    executor.signal(&id, crate::sys::Sig::KILL);
    outcome
}

fn start_invocation(
    executor: &dyn Executor,
    driver: &dyn Driver,
    invocation: Invocation,
    cwd: &Path,
) -> Result<Started, ProbeOutcome> {
    let command = invocation.program.clone();
    let Some(request) = driver.usage_request_input("owl-probe") else {
        return Err(ProbeOutcome::Failed(
            "the driver cannot report utilization".into(),
        ));
    };
    let mut handle = executor
        .start(&invocation, cwd)
        .map_err(|e| ProbeOutcome::Failed(format!("starting '{}': {e}", command.display())))?;
    let written = handle
        .stdin
        .write_all(&request)
        .and_then(|()| handle.stdin.flush());
    let id = handle.id;
    if let Err(e) = written {
        executor.signal(&id, crate::sys::Sig::KILL);
        return Err(ProbeOutcome::Failed(format!(
            "writing the usage request: {e}"
        )));
    }
    Ok(Started {
        id,
        handle,
        invocation,
    })
}

/// Reads the probe's answer (within [`PROBE_TIMEOUT`]), then closes its stdin (the CLI exits
/// on EOF) and waits a moment for its exit. Blocks: the side probe runs it on a thread. The
/// caller kills the probe's group after, by its id.
pub(crate) fn answer(driver: &dyn Driver, started: Started) -> ProbeOutcome {
    let Started {
        handle, invocation, ..
    } = started;
    let RunHandle {
        stdin,
        stdout,
        stderr,
        exit,
        ..
    } = handle;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        super::reader::each_line(stdout, |line| tx.send(line.to_vec()).is_ok());
    });
    std::thread::spawn(move || std::io::copy(&mut { stderr }, &mut std::io::sink()));
    let deadline = Instant::now() + PROBE_TIMEOUT;
    // A stop signal ends the wait at once: a Ctrl-C is not held for the probe's timeout.
    let mut stopped = || super::StopLatch::received().is_some();
    let outcome = loop {
        let line = match crate::wait::until(&rx, deadline, Some((STOP_POLL, &mut stopped))) {
            Waited::Got(line) => line,
            Waited::Stopped => {
                let sig = super::StopLatch::received().unwrap_or("a stop signal");
                break ProbeOutcome::Failed(format!("owl received {sig}"));
            }
            Waited::TimedOut => {
                break ProbeOutcome::Failed(format!(
                    "no answer within {}s",
                    PROBE_TIMEOUT.as_secs()
                ))
            }
            Waited::Closed => {
                break ProbeOutcome::Failed("the agent exited without answering".into())
            }
        };
        match driver.parse_line(&line) {
            Ok(AgentEvent::ControlResponse { usage: Some(u), .. }) => {
                break match u {
                    Usage::Unknown => ProbeOutcome::Unknown,
                    Usage::Windows(w) => ProbeOutcome::Observed(w),
                    Usage::NoPlan => ProbeOutcome::NoPlan,
                }
            }
            Ok(AgentEvent::ControlResponse { ok: false, .. }) => {
                break ProbeOutcome::Failed("the agent refused the usage request".into())
            }
            _ => continue,
        }
    };
    // Closed stdin ends the CLI; its exit is waited for (not polled), a moment at most.
    drop(stdin);
    let _ = crate::wait::within(&crate::wait::on_thread(exit), EXIT_WAIT);
    match outcome {
        // The CLI answers "unknown" the same way whether the API is there or not (it asks
        // the API nothing before a prompt): owl asks the network itself.
        ProbeOutcome::Unknown => match driver.api_endpoint(&invocation) {
            Some(endpoint) => match reach(&invocation, &endpoint) {
                Ok(()) => ProbeOutcome::Unknown,
                Err(why) => ProbeOutcome::Unreachable(why),
            },
            None => ProbeOutcome::Unknown,
        },
        other => other,
    }
}

/// How often a probe's wait for its answer looks at the stop latch.
const STOP_POLL: Duration = Duration::from_millis(100);

/// How long a probe that answered gets to exit on its closed stdin before its group is killed.
const EXIT_WAIT: Duration = Duration::from_secs(2);

/// Whether the first hop the CLI would take to `endpoint` takes a TCP connection: its
/// proxy when its environment names one for that host, else the endpoint itself. Nothing
/// is sent; the connection is closed at once.
fn reach(invocation: &Invocation, endpoint: &str) -> Result<(), String> {
    let (host, port) = first_hop(endpoint, &|k| invocation.env_var(k))?;
    let shown = format!("{host}:{port}");
    let addrs = std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port))
        .map_err(|e| format!("cannot resolve {host}: {e}"))?;
    let mut last = None;
    for addr in addrs {
        match std::net::TcpStream::connect_timeout(&addr, REACH_TIMEOUT) {
            Ok(_) => return Ok(()),
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(e) => format!("connecting to {shown}: {e}"),
        None => format!("cannot resolve {host}: no address"),
    })
}

/// The host and port a client with this environment connects to first for `endpoint`:
/// the proxy of its scheme (`HTTPS_PROXY`, `ALL_PROXY`, either case) unless `NO_PROXY`
/// exempts the host, else the endpoint's own.
fn first_hop(
    endpoint: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(String, u16), String> {
    let (scheme, host, port) = split_url(endpoint)?;
    let proxy_vars: &[&str] = if scheme == "https" {
        &["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"]
    } else {
        &["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
    };
    let exempt = ["NO_PROXY", "no_proxy"]
        .iter()
        .filter_map(|k| env(k))
        .any(|list| no_proxy_matches(&list, &host));
    match proxy_vars.iter().find_map(|k| env(k)) {
        Some(proxy) if !exempt => split_url(&proxy).map(|(_, h, p)| (h, p)),
        _ => Ok((host, port)),
    }
}

/// `scheme://host[:port][/…]` (the scheme defaults to http, as curl reads a proxy).
fn split_url(url: &str) -> Result<(String, String, u16), String> {
    let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
    let scheme = scheme.to_ascii_lowercase();
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit('@').next().unwrap_or_default();
    let default_port = if scheme == "https" { 443 } else { 80 };
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (host, after) = v6.split_once(']').ok_or(format!("'{url}' is not a URL"))?;
            (host, after.strip_prefix(':'))
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    if host.is_empty() {
        return Err(format!("'{url}' names no host"));
    }
    let port = match port {
        Some(p) => p
            .parse()
            .map_err(|_| format!("'{url}' has no valid port"))?,
        None => default_port,
    };
    Ok((scheme, host.to_string(), port))
}

/// Whether a `NO_PROXY` list exempts `host`: `*`, the host itself, or a domain it is in.
fn no_proxy_matches(list: &str, host: &str) -> bool {
    list.split(',').map(str::trim).any(|entry| {
        let entry = entry.trim_start_matches('.');
        entry == "*"
            || (!entry.is_empty()
                && (host.eq_ignore_ascii_case(entry)
                    || host
                        .to_ascii_lowercase()
                        .ends_with(&format!(".{}", entry.to_ascii_lowercase()))))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_first_hop_is_the_endpoint_or_its_proxy() {
        let none = env_of(&[]);
        assert_eq!(
            first_hop("https://api.anthropic.com", &none),
            Ok(("api.anthropic.com".into(), 443))
        );
        assert_eq!(
            first_hop("http://127.0.0.1:8080/v1", &none),
            Ok(("127.0.0.1".into(), 8080))
        );
        let proxied = env_of(&[("HTTPS_PROXY", "http://user:pw@proxy.corp:3128")]);
        assert_eq!(
            first_hop("https://api.anthropic.com", &proxied),
            Ok(("proxy.corp".into(), 3128))
        );
        // An http base URL (a local gateway) is not sent through the https proxy.
        assert_eq!(
            first_hop("http://[::1]:9000", &proxied),
            Ok(("::1".into(), 9000))
        );
        let exempt = env_of(&[
            ("https_proxy", "proxy.corp:3128"),
            ("NO_PROXY", "localhost, .anthropic.com"),
        ]);
        assert_eq!(
            first_hop("https://api.anthropic.com", &exempt),
            Ok(("api.anthropic.com".into(), 443))
        );
        assert!(first_hop("https://:443", &none).is_err());
        assert!(first_hop("https://host:port", &none).is_err());
    }

    #[test]
    fn a_closed_port_is_unreachable_and_a_listening_one_is_not() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let open = format!("http://{}", listener.local_addr().unwrap());
        let invocation = Invocation {
            program: "claude".into(),
            args: Vec::new(),
            env_set: Vec::new(),
            env_remove: ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
                .map(String::from)
                .to_vec(),
            files: Vec::new(),
        };
        assert_eq!(reach(&invocation, &open), Ok(()));
        drop(listener);
        let why = reach(&invocation, &open).unwrap_err();
        assert!(why.starts_with("connecting to 127.0.0.1:"), "{why}");
        assert!(why.contains("refused"), "{why}");
    }
}
