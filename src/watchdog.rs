//! The last resort against a silent store: an exchange with it that is not answered in time ends owl (exit 1), killing first the agent of a live Run that owl could no longer watch.
//!
//! A path that accepts every byte and answers none (a stuck proxy, a server that stopped
//! answering, a firewall that keeps the connection) defeats every timeout of the socket:
//! TCP sees its bytes acknowledged. The PostgreSQL client is synchronous and cannot be
//! cancelled from outside, so the bound is kept here, by this process's own clock, on a
//! thread that owns nothing else: a statement or a connect that outlives its bound ends the
//! process. A tick from cron never hangs on the store, and no agent outlives the supervisor
//! that could stop it: its process group is killed before owl exits.

use std::io::Write;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::sys::{self, Sig};

/// What the watchdog watches: the exchanges in flight (each thread's, by a number of its
/// own), and the agent that must not outlive owl.
#[derive(Default)]
struct Watched {
    exchanges: std::collections::BTreeMap<u64, Exchange>,
    next: u64,
    /// The process group of a live Run's agent.
    agent: Option<i32>,
}

/// An exchange with the store in flight.
struct Exchange {
    /// The store as owl prints it (never a password) and what owl was doing there.
    store: String,
    step: String,
    bound: Duration,
    deadline: Instant,
}

struct Watchdog {
    watched: Mutex<Watched>,
    changed: Condvar,
}

static WATCHDOG: OnceLock<Watchdog> = OnceLock::new();

/// The watchdog, its thread started on first use.
fn watchdog() -> &'static Watchdog {
    static STARTED: std::sync::Once = std::sync::Once::new();
    let w = WATCHDOG.get_or_init(|| Watchdog {
        watched: Mutex::new(Watched::default()),
        changed: Condvar::new(),
    });
    STARTED.call_once(|| {
        let started = std::thread::Builder::new()
            .name("owl-watchdog".into())
            .spawn(move || watch(w));
        if let Err(e) = started {
            tracing::warn!("starting the store's watchdog: {e}");
        }
    });
    w
}

fn lock(w: &Watchdog) -> MutexGuard<'_, Watched> {
    w.watched.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `exchange` (one statement, a connect) with the store under `bound`: past it, owl
/// ends (see the module's doc). `store` is how the store is printed; `step` says what owl
/// was doing, for the one line it prints then.
pub(crate) fn bounded<T>(
    store: &dyn std::fmt::Display,
    step: &str,
    bound: Duration,
    exchange: impl FnOnce() -> T,
) -> T {
    let w = watchdog();
    let id = {
        let mut watched = lock(w);
        watched.next += 1;
        let id = watched.next;
        watched.exchanges.insert(
            id,
            Exchange {
                store: store.to_string(),
                step: step.to_string(),
                bound,
                deadline: Instant::now() + bound,
            },
        );
        id
    };
    w.changed.notify_all();
    let done = exchange();
    lock(w).exchanges.remove(&id);
    w.changed.notify_all();
    done
}

/// The process group of the Run's agent, killed before owl gives up on the store; `None`
/// once the Run is over.
pub(crate) fn guard_agent(group: Option<i32>) {
    let w = watchdog();
    lock(w).agent = group;
    w.changed.notify_all();
}

/// The watchdog's thread: sleeps until the exchange in flight is due, and gives up then.
fn watch(w: &Watchdog) {
    let mut watched = lock(w);
    loop {
        let due = watched.exchanges.values().map(|e| e.deadline).min();
        watched = match due {
            None => w.changed.wait(watched).unwrap_or_else(|e| e.into_inner()),
            Some(at) if Instant::now() >= at => give_up(&watched),
            Some(at) => {
                let left = at.saturating_duration_since(Instant::now());
                w.changed
                    .wait_timeout(watched, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
        };
    }
}

/// Kills the guarded agent's group, says why on stderr, and ends owl with exit 1.
fn give_up(watched: &Watched) -> ! {
    let late = watched.exchanges.values().min_by_key(|e| e.deadline);
    let mut line = match late {
        Some(e) => format!(
            "owl: the store {} did not answer within {} s ({}); giving up",
            e.store,
            e.bound.as_secs(),
            e.step
        ),
        None => "owl: the store did not answer; giving up".to_string(),
    };
    if let Some(group) = watched.agent {
        // Before owl goes: nothing would stop the agent at a ceiling once it is gone.
        let _ = sys::signal_group(group, Sig::KILL);
        line.push_str(
            "; the Run's agent was killed, owl could not watch it (the next tick that \
             reaches the store records the Run)",
        );
    }
    let _ = writeln!(std::io::stderr(), "{line}");
    std::process::exit(i32::from(crate::error::EXIT_FAILURE))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether an exchange with this step is watched now.
    fn watching(step: &str) -> bool {
        lock(watchdog()).exchanges.values().any(|e| e.step == step)
    }

    #[test]
    fn an_exchange_is_watched_while_it_lasts_and_not_after() {
        // Other tests' exchanges run beside this one: each is known by its own step.
        let step = "reading in the watchdog's own test";
        let answer = bounded(&"db", step, Duration::from_secs(5), || {
            assert!(watching(step));
            42
        });
        assert_eq!(answer, 42);
        assert!(!watching(step));
    }

    #[test]
    fn exchanges_on_two_threads_are_each_watched_apart() {
        let (a, b) = ("thread a's exchange", "thread b's exchange");
        let (a_in, b_in, a_out) = (
            std::sync::Barrier::new(2),
            std::sync::Barrier::new(2),
            std::sync::Barrier::new(2),
        );
        std::thread::scope(|s| {
            // a starts first and ends first, while b still runs.
            s.spawn(|| {
                bounded(&"db", a, Duration::from_secs(5), || {
                    a_in.wait();
                    b_in.wait();
                });
                a_out.wait();
            });
            a_in.wait();
            bounded(&"db", b, Duration::from_secs(5), || {
                b_in.wait();
                a_out.wait();
                assert!(!watching(a) && watching(b), "b's bound went with a");
            });
            assert!(!watching(b));
        });
    }
}
