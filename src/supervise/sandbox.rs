//! The `sandbox` Executor: the agent and every tool it starts run under bubblewrap, able to write the Job's own clone, the Account's credential store and a private `/tmp`, nothing else of the user's; a pid namespace ends the Run's processes with it.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use super::netproxy::{self, Allowed, NetProxy};
use super::process::{
    Executor, HandleId, LocalExecutor, LostProcesses, RunHandle, RunPlace, Supervisor,
};
use crate::driver::Invocation;
use crate::sys::{self, Sig};

/// The most a sandbox's report (a count) can take.
const REPORT_CAP: u64 = 64;

/// The hidden subcommand that runs inside the sandbox as the agent's parent.
pub(crate) const INIT_COMMAND: &str = "__sandbox-init";

/// Directories of the user's home a tool never needs and must not read: keys and tokens.
/// They are hidden (an empty tmpfs over each); the rest of the home is read-only. `gh`
/// keeps its token in `.config/gh/hosts.yml` without a keyring: the token the pull-request
/// hook pushes with, outside the sandbox, after the check.
const HIDDEN_IN_HOME: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".kube",
    ".docker",
];

/// Files of the user's home that hold credentials in plain text: git's credential stores
/// (`credential.helper store`), netrc (which git, curl and pip read), cargo's and PyPI's
/// publish tokens. Each is hidden behind an empty file.
const HIDDEN_FILES_IN_HOME: &[&str] = &[
    ".git-credentials",
    ".config/git/credentials",
    ".netrc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".pypirc",
];

/// Why the sandbox cannot be used, with what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}; {fix}")]
pub(crate) struct Unusable {
    pub(crate) what: String,
    pub(crate) fix: &'static str,
}

/// Checks that bubblewrap runs here as owl will run it: a read-only root and a pid
/// namespace. Without it owl never runs a sandboxed Run unconfined.
pub(crate) fn check(bwrap: &Path) -> Result<(), Unusable> {
    const INSTALL: &str = "install bubblewrap (Debian/Ubuntu: `apt install bubblewrap`) or set \
                           sandbox.command to its path";
    const USERNS: &str = "enable unprivileged user namespaces (`sysctl -w \
                          kernel.unprivileged_userns_clone=1`, or on Ubuntu \
                          `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`), or use \
                          executor: local";
    let path = crate::driver::locate(bwrap, "sandbox.command").map_err(|e| Unusable {
        what: format!("executor: sandbox needs bubblewrap, but {e}"),
        fix: INSTALL,
    })?;
    let mut trial = std::process::Command::new(&path);
    trial
        .args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"])
        .args([
            "--unshare-pid",
            "--unshare-net",
            "--die-with-parent",
            "--new-session",
            "true",
        ]);
    // Bounded: this runs on every tick of a sandboxed Account.
    let out = crate::oneshot::run(trial, None, CHECK_TIMEOUT, 4096).map_err(|e| Unusable {
        what: e.to_string(),
        fix: INSTALL,
    })?;
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr).trim().to_string();
    Err(Unusable {
        what: format!(
            "bubblewrap ('{}') cannot make a sandbox here: {said}",
            path.display()
        ),
        fix: USERNS,
    })
}

/// How long bubblewrap's trial sandbox may take (it takes milliseconds).
const CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs a Run's agent under bubblewrap; everything else is the local Executor's.
pub(crate) struct SandboxExecutor {
    pub(crate) local: LocalExecutor,
    /// bubblewrap, as `sandbox.command` names it.
    pub(crate) bwrap: PathBuf,
    /// What every Run may write besides its own place: the credential store and
    /// `sandbox.writable`.
    pub(crate) writable: Vec<PathBuf>,
    /// The Run started: the bubblewrap it runs under, and where the process inside the
    /// sandbox reports how many leftovers it killed.
    run: std::sync::Mutex<Option<(PathBuf, PathBuf)>>,
    /// The Run's only way out of its network namespace, while it runs.
    proxy: std::sync::Mutex<Option<NetProxy>>,
}

/// Where the proxy's socket is inside the sandbox (its private `/tmp`).
const INSIDE_SOCKET: &str = "/tmp/.owl-net.sock";

impl SandboxExecutor {
    pub(crate) fn new(
        local: LocalExecutor,
        bwrap: PathBuf,
        writable: Vec<PathBuf>,
    ) -> SandboxExecutor {
        SandboxExecutor {
            local,
            bwrap,
            writable,
            run: std::sync::Mutex::new(None),
            proxy: std::sync::Mutex::new(None),
        }
    }

    /// The command that runs `inv` in the sandbox: bubblewrap, then owl's init, then the
    /// agent. It may write its place (the Job's clone, the Run's own files) and
    /// [`SandboxExecutor::writable`].
    fn wrap(
        &self,
        inv: &Invocation,
        place: &RunPlace,
        (report, socket): (&Path, &Path),
    ) -> io::Result<Invocation> {
        let bwrap =
            crate::driver::locate(&self.bwrap, "sandbox.command").map_err(io::Error::other)?;
        let writable: Vec<PathBuf> = [place.workspace, place.files]
            .into_iter()
            .map(Path::to_path_buf)
            .chain(self.writable.iter().cloned())
            .collect();
        let cwd = place.workspace;
        let owl = std::env::current_exe()?.canonicalize()?;
        let mut args: Vec<String> = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
            .map(String::from)
            .to_vec();
        args.extend(["--tmpfs".into(), "/tmp".into()]);
        // The network: a namespace of its own, with a loopback and no route out; the proxy's
        // socket, bound in, is the only way (owl's init relays to it from a loopback port).
        args.extend(["--unshare-net".into(), "--bind".into()]);
        args.extend([socket.display().to_string(), INSIDE_SOCKET.into()]);
        // What the sandbox runs (owl's init, the agent CLI) must stay reachable when it lives
        // under /tmp: its top directory there is bound back, read-only.
        let program = crate::driver::locate(&inv.program, "the command")
            .ok()
            .and_then(|p| p.canonicalize().ok());
        let mut back: Vec<PathBuf> = [Some(owl.clone()), program]
            .into_iter()
            .flatten()
            .filter_map(|p| under_tmp(&p))
            .collect();
        back.sort();
        back.dedup();
        for dir in back {
            let dir = dir.display().to_string();
            args.extend(["--ro-bind".into(), dir.clone(), dir]);
        }
        if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
            for hidden in HIDDEN_IN_HOME.iter().map(|d| home.join(d)) {
                if hidden.is_dir() && !writable.iter().any(|w| w.starts_with(&hidden)) {
                    args.extend(["--tmpfs".into(), hidden.display().to_string()]);
                }
            }
        }
        for dir in &writable {
            std::fs::create_dir_all(dir)?;
            let dir = dir.display().to_string();
            args.extend(["--bind".into(), dir.clone(), dir]);
        }
        // After the writable binds: a credential file inside one (`sandbox.writable:
        // [~/.cargo]`) is hidden all the same.
        if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
            for hidden in HIDDEN_FILES_IN_HOME.iter().map(|f| home.join(f)) {
                if hidden.is_file() {
                    let hidden = hidden.display().to_string();
                    args.extend(["--ro-bind".into(), "/dev/null".into(), hidden]);
                }
            }
        }
        args.extend(
            [
                "--unshare-pid",
                "--die-with-parent",
                "--new-session",
                "--chdir",
            ]
            .map(String::from),
        );
        args.push(cwd.display().to_string());
        args.extend(["--".into(), owl.display().to_string(), INIT_COMMAND.into()]);
        args.extend([report.display().to_string(), "--".into()]);
        args.push(inv.program.display().to_string());
        args.extend(inv.args.iter().cloned());
        let mut env_set = inv.env_set.clone();
        // The host's TMPDIR is read-only in here; the private /tmp is not.
        env_set.push(("TMPDIR".into(), "/tmp".into()));
        env_set.push((netproxy::SOCKET_VAR.into(), INSIDE_SOCKET.into()));
        Ok(Invocation {
            program: bwrap,
            args,
            env_set,
            env_remove: inv.env_remove.clone(),
            files: inv.files.clone(),
        })
    }
}

impl Executor for SandboxExecutor {
    fn kind(&self) -> crate::config::ExecutorKind {
        crate::config::ExecutorKind::Sandbox
    }

    fn prepare(&self) -> io::Result<()> {
        self.local.prepare()
    }

    fn supervisor(&self) -> Supervisor {
        self.local.supervisor()
    }

    fn supervisor_alive(&self, supervisor: &Supervisor) -> bool {
        self.local.supervisor_alive(supervisor)
    }

    fn missing(&self) -> Option<String> {
        let why = crate::driver::locate(&self.bwrap, "sandbox.command").err()?;
        Some(format!(
            "executor: sandbox needs bubblewrap, but {why}; install it (Debian/Ubuntu: \
             `apt install bubblewrap`)"
        ))
    }

    fn ready(&self) -> Result<(), Unusable> {
        // Never unconfined: without a usable bubblewrap a sandboxed Account waits.
        check(&self.bwrap)
    }

    fn own_clone(&self) -> bool {
        // The agent can write its `.git`: a worktree's is the user's repository's.
        true
    }

    fn spawn(&self, inv: &Invocation, place: &RunPlace, run_id: i64) -> io::Result<RunHandle> {
        let report = place.files.join("sandbox-report");
        let _ = std::fs::remove_file(&report);
        // A short path (a socket's is at most 107 bytes), the Run's own; bound into the
        // sandbox at a fixed place.
        let socket = PathBuf::from(format!("/tmp/owl-net-{}-{run_id}.sock", sys::own_pid()));
        let proxy = NetProxy::start(
            &socket,
            Allowed::new(place.hosts.iter().map(String::as_str)),
        )?;
        let wrapped = self.wrap(inv, place, (&report, &socket))?;
        *self.proxy.lock().unwrap_or_else(|e| e.into_inner()) = Some(proxy);
        *self.run.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((wrapped.program.clone(), report));
        self.local.spawn(&wrapped, place, run_id)
    }

    // The CLI's own checks (its version, its login, the zero-token probe) run as the local
    // Executor runs them: they are owl asking the user's CLI about itself, given nothing of
    // a Job's to read or write, and the sandbox hides nothing they could reach.
    fn start(&self, inv: &Invocation, cwd: &Path) -> io::Result<RunHandle> {
        self.local.start(inv, cwd)
    }

    fn oneshot(
        &self,
        call: super::process::Oneshot<'_>,
    ) -> Result<crate::oneshot::Ended, crate::oneshot::Failed> {
        self.local.oneshot(call)
    }

    fn state(&self, agent: &HandleId) -> Option<char> {
        self.local.state(agent)
    }

    fn signal(&self, agent: &HandleId, signal: Sig) {
        let pgid = agent.pid;
        // bubblewrap does not pass signals on: a stop the agent should see (SIGINT, SIGTERM)
        // goes to owl's init inside, which hands it to the agent's group. SIGKILL ends
        // bubblewrap, and with it the namespace.
        let init = (signal != Sig::KILL).then(|| init_under(pgid)).flatten();
        match init {
            Some(pid) => {
                tracing::info!(pid, "{signal:?} to owl's init in the sandbox");
                if let Err(e) = sys::signal_pid(pid, signal) {
                    tracing::warn!(pid, "could not signal the sandbox's init: {e}");
                }
            }
            None => {
                if signal != Sig::KILL {
                    tracing::warn!(
                        pgid,
                        "owl's init in the sandbox was not found; signalling bubblewrap"
                    );
                }
                self.local.signal(agent, signal)
            }
        }
    }

    fn kill_leftovers(&self, agent: &HandleId) -> usize {
        // Inside, owl's init killed what the agent left in the namespace and said how many.
        // The file is in the Run's own dir, the agent's to replace: a FIFO, a link to
        // /dev/zero or a huge file there is refused, not waited on or read.
        let Some((bwrap, report)) = self.run.lock().unwrap_or_else(|e| e.into_inner()).clone()
        else {
            return self.local.kill_leftovers(agent);
        };
        let inside = match crate::untrusted::read_to_string(&report, REPORT_CAP) {
            Ok(n) => n.trim().parse::<usize>().unwrap_or(0),
            Err(e) if e.is_missing() => 0,
            Err(e) => {
                tracing::warn!("the sandbox's report: {e}");
                0
            }
        };
        // bubblewrap's own pid 1 in the namespace can outlive the process owl waited for by a
        // moment (it reports the exit, then exits): it is the sandbox ending, not something
        // the agent left. It is ended first, uncounted; the rest is the local Executor's.
        let me = sys::own_pid();
        super::process::kill_until_none(|| {
            sys::descendants_of(me)
                .into_iter()
                .filter(|pid| sys::stat(*pid).is_some_and(|s| s.state != 'Z'))
                .filter(|pid| is_bwrap(&bwrap, *pid))
                .collect()
        });
        inside + self.local.kill_leftovers(agent)
    }

    fn kill_lost(&self, lost: &LostProcesses) -> usize {
        self.local.kill_lost(lost)
    }

    fn network(&self) -> Option<String> {
        // Taken: the proxy closes with the Run.
        let proxy = self
            .proxy
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()?;
        proxy.summary()
    }
}

/// Whether `pid` is one of bubblewrap's own processes: its argv[0] is `bwrap`, the command
/// owl ran.
fn is_bwrap(bwrap: &Path, pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|argv| {
        argv.split(|b| *b == 0).next() == Some(bwrap.as_os_str().as_encoded_bytes())
    })
}

/// `/tmp/<first>` for a path under `/tmp`, which a sandbox's private `/tmp` would hide.
fn under_tmp(path: &Path) -> Option<PathBuf> {
    let rest = path.strip_prefix("/tmp").ok()?;
    let first = rest.components().next()?;
    Some(Path::new("/tmp").join(first))
}

/// owl's init under bubblewrap's `pgid`: found through the kernel's children lists, or,
/// when they miss it (a list read while processes come and go can), through a scan of every
/// process. A stop signal sent to bubblewrap instead would never reach the agent.
fn init_under(pgid: i32) -> Option<i32> {
    let found = |pids: Vec<i32>| pids.into_iter().find(|pid| is_init(*pid));
    // A look that misses it is tried again a few times before the stop goes to bubblewrap,
    // where it would never reach the agent (CI saw a stop signal missed once in a while).
    (0..INIT_LOOKS).find_map(|look| {
        if look > 0 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        found(sys::descendants_of(pgid)).or_else(|| found(sys::scan_descendants(pgid)))
    })
}

/// How many times owl looks for its init in a sandbox before it gives up on it.
const INIT_LOOKS: u32 = 5;

/// Whether `pid` is owl's init in a sandbox: its argv[1] is [`INIT_COMMAND`] (bubblewrap's
/// own processes carry the whole command line, that word included, further on).
fn is_init(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|argv| argv.split(|b| *b == 0).nth(1) == Some(INIT_COMMAND.as_bytes()))
}

/// owl's init inside the sandbox (pid 2, under bubblewrap's own pid 1): starts the agent
/// in its own group, hands it the stop signals owl sends, and once it exits kills every
/// process left in the namespace, in any session, writing how many to `report`. Returns
/// the agent's exit code (128 + its signal when killed).
pub(crate) fn init(report: &Path, argv: &[OsString]) -> i32 {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let Some((program, args)) = argv.split_first() else {
        eprintln!("owl {INIT_COMMAND}: no command");
        return 2;
    };
    let mut signals =
        match signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM, libc::SIGHUP]) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("owl {INIT_COMMAND}: {e}");
                return 2;
            }
        };
    let mut command = std::process::Command::new(program);
    command.args(args).process_group(0);
    if let Some(socket) = std::env::var_os(netproxy::SOCKET_VAR) {
        command.env_remove(netproxy::SOCKET_VAR);
        match netproxy::relay(PathBuf::from(socket)) {
            Ok(port) => {
                command.envs(netproxy::proxy_env(port));
                for var in netproxy::AROUND_THE_PROXY {
                    command.env_remove(var);
                }
            }
            Err(e) => {
                eprintln!("owl {INIT_COMMAND}: the network relay: {e}");
                return 2;
            }
        }
    }
    let mut child = match command.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "owl {INIT_COMMAND}: cannot run '{}': {e}",
                program.to_string_lossy()
            );
            return 127;
        }
    };
    let group = child.id() as i32;
    std::thread::spawn(move || {
        for sig in signals.forever() {
            if let Some(sig) = Sig::from_named_raw(sig) {
                let _ = sys::signal_group(group, sig);
            }
        }
    });
    let status = child.wait();
    let killed = kill_namespace();
    if let Err(e) = std::fs::write(report, killed.to_string()) {
        eprintln!("owl {INIT_COMMAND}: writing {}: {e}", report.display());
    }
    match status {
        Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
        Err(_) => 1,
    }
}

/// Kills every process of this pid namespace but its init (1) and this one; returns how
/// many there were. `/proc` here is the namespace's own.
fn kill_namespace() -> usize {
    let me = std::process::id() as i32;
    super::process::kill_until_none(|| {
        sys::all_pids()
            .into_iter()
            .filter(|pid| *pid != 1 && *pid != me)
            .filter(|pid| sys::stat(*pid).is_some_and(|s| s.state != 'Z'))
            .collect()
    })
}
