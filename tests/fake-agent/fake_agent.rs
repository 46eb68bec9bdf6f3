//! A stand-in for the Claude Code CLI in owl's tests: speaks the same stdin/stdout
//! stream-json protocol and replays transcripts recorded from the real CLI, following a
//! script file named by `FAKE_AGENT_SCRIPT`.
//!
//! Script lines (one step each; `#` starts a comment):
//!   read-prompt                 wait for the stream-json user message on stdin
//!   replay FILE [FROM [TO]]     print lines FROM..=TO (1-based) of a recorded transcript
//!   emit TEXT                   print TEXT as one stdout line
//!   emit-bytes ESCAPED          print bytes (\xNN, \n, \0 escapes), no newline added
//!   emit-long BYTES             print one line of BYTES 'a's inside a JSON string
//!   cat FILE                    copy FILE to stdout in large writes (a fast stream)
//!   stderr TEXT                 print TEXT on stderr
//!   sleep MS                    sleep (an interrupt cuts it short)
//!   plan-work N                 N steps of modelled work (`FAKE_AGENT_PLAN`, see plan.rs), each
//!                               five simulated minutes and its rate_limit_event
//!   write PATH TEXT             write TEXT (\n escapes) to PATH under the cwd
//!   commit MESSAGE              git add -A && git commit -m MESSAGE in the cwd
//!   ignore-sigterm              ignore SIGTERM from now on
//!   hang-after-interrupt        after an interrupt, print the result but never exit by itself
//!   deaf-to-interrupt           never answer an interrupt (nor stop for it)
//!   note-sigterm                on SIGTERM, write `sigterm` in the record and exit 143
//!   try-write PATH              append to PATH (`~/` is $HOME), saying how it went in try-write.log
//!   proxy-connect HOST:PORT     ask the proxy HTTPS_PROXY names for a tunnel to HOST:PORT, say
//!                               `ping` through it and read a line back; net.log says how it went
//!   direct-connect HOST:PORT    open a TCP connection to HOST:PORT, no proxy; net.log says how
//!   spawn-session SECS          start `sleep SECS` in a new session (like the Bash tool)
//!   spawn-holding SECS          start `sleep SECS` that keeps our stdout open
//!   close-stdout                close stdout and carry on
//!   wait-stdin-eof              wait until stdin is closed
//!   wait-file PATH              wait until PATH exists (the test releases the agent)
//!   fill-disk PATH              write PATH until its filesystem is full (ENOSPC)
//!   exit CODE                   exit now
//! An `interrupt` control request aborts the script the way the real CLI aborts a turn.
//! A `get_usage` control request is answered with the next line of the file named by
//! `FAKE_AGENT_USAGE` (a JSON `rate_limits` value; the last line repeats), else `null`,
//! the way the real CLI answers before its first API response; a line `no-plan` answers
//! as the real CLI does with no login (not-logged-in.jsonl).
//! Without a script file the agent waits for its prompt, like the real CLI.
//! `auth status` answers a plan login, or `FAKE_AGENT_AUTH` (JSON) when set (only for the
//! `CLAUDE_CONFIG_DIR` named by `FAKE_AGENT_AUTH_STORE`, when that is set); with
//! `FAKE_AGENT_RELAY` the real CLI answers every other.
//! `FAKE_AGENT_VERSION_GATE=PATH` makes `--version` create PATH.waiting and wait for PATH:
//! a pause point between owl's pick and its Run, released by the test.
//! `FAKE_AGENT_USAGE_DELAY_MS=MS` answers each `get_usage` MS late (a slow probe).
//! `FAKE_AGENT_USAGE_GATE=PATH` makes a `get_usage` request create PATH.waiting and wait
//! for PATH before it is answered: a probe held, released by the test.
//! `FAKE_AGENT_VERSION_HOLD=SECS` makes `--version` answer, then leave `sleep SECS` holding
//! its stdout, in its own session (a wrapper script's background job), its pid in
//! `version-holder.txt` of the record dir.
//! `FAKE_AGENT_RECORD=DIR` writes argv.json, env.json, cwd.txt, stdin.jsonl and stdout.bin there,
//! and appends each `--version` and `auth status` call with its cwd to helper-cwd.txt.

// Leaving children behind unwaited is the point: they play the tool processes owl must clean up.
#![allow(clippy::zombie_processes)]

mod plan;

use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

const FIXTURE_DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/claude-code-2.1.197"
);

/// Environment variables whose presence the tests check (values of secrets are not kept).
const RECORDED_ENV: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CONFIG_DIR",
    "DISABLE_AUTOUPDATER",
    "OWL_RUN_ID",
    "FAKE_ACCOUNT_MARKER",
    "PATH",
    "PGPASSWORD",
    "PGPASSFILE",
];

struct Shared {
    out: Mutex<Option<std::io::Stdout>>,
    /// A copy of everything written to stdout, when recording.
    tee: Mutex<Option<fs::File>>,
    interrupted: AtomicBool,
    stdin_closed: AtomicBool,
    hang_after_interrupt: AtomicBool,
    deaf_to_interrupt: AtomicBool,
    prompt_seen: (Mutex<bool>, Condvar),
    record: Option<PathBuf>,
}

impl Shared {
    fn emit(&self, bytes: &[u8]) {
        if let Some(out) = self.out.lock().unwrap().as_mut() {
            let _ = out.write_all(bytes);
            let _ = out.flush();
            if let Some(tee) = self.tee.lock().unwrap().as_mut() {
                let _ = tee.write_all(bytes);
            }
        }
    }

    fn emit_line(&self, line: &str) {
        let mut bytes = line.as_bytes().to_vec();
        bytes.push(b'\n');
        self.emit(&bytes);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--peak-rss-into") {
        peak_rss_of(Path::new(&args[2]), &args[3..]);
    }
    // Options before the subcommand (owl's `--setting-sources=`) are the CLI's, as the
    // real one takes them.
    let subcommand = args
        .iter()
        .skip(1)
        .position(|a| !a.starts_with("--setting-sources"))
        .map_or(args.len(), |i| i + 1);
    let auth_status = args.get(subcommand..subcommand + 2)
        == Some(&["auth".to_string(), "status".to_string()][..]);
    if auth_status || args.iter().any(|a| a == "--version") {
        // Where a helper call started: owl starts none in the caller's directory.
        if let Some(dir) = std::env::var_os("FAKE_AGENT_RECORD").map(PathBuf::from) {
            fs::create_dir_all(&dir).unwrap();
            let cwd = std::env::current_dir().unwrap_or_default();
            let line = format!("{} {}\n", args[1..].join(" "), cwd.display());
            let mut log = fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join("helper-cwd.txt"))
                .unwrap();
            std::io::Write::write_all(&mut log, line.as_bytes()).unwrap();
        }
    }
    // The test's answer, for the credential store it names (`FAKE_AGENT_AUTH_STORE`), if any.
    let given = std::env::var_os("FAKE_AGENT_AUTH").is_some()
        && std::env::var_os("FAKE_AGENT_AUTH_STORE")
            .is_none_or(|store| std::env::var_os("CLAUDE_CONFIG_DIR") == Some(store));
    // Relayed too, unless the test gives the answer.
    if auth_status && (given || std::env::var_os("FAKE_AGENT_RELAY").is_none()) {
        // As 2.1.332 answers for a stored plan login (auth-status.json), unless the test
        // gives the answer: `FAKE_AGENT_AUTH=JSON`, exit 1 when it says not logged in.
        let answer = std::env::var("FAKE_AGENT_AUTH").ok().filter(|_| given).unwrap_or_else(|| {
            r#"{"loggedIn":true,"authMethod":"claude.ai","apiProvider":"firstParty","subscriptionType":"max"}"#.into()
        });
        println!("{answer}");
        std::process::exit(if answer.contains(r#""loggedIn":false"#) {
            1
        } else {
            0
        });
    }
    if let Some(real) = std::env::var_os("FAKE_AGENT_RELAY") {
        if !args.iter().any(|a| a == "--version") {
            relay(Path::new(&real), &args[1..]);
        }
    }
    if args.iter().any(|a| a == "--version") {
        if let Some(dir) = std::env::var_os("FAKE_AGENT_RECORD").map(PathBuf::from) {
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join("version-env.json"), recorded_env().to_string()).unwrap();
        }
        if let Some(gate) = std::env::var_os("FAKE_AGENT_VERSION_GATE").map(PathBuf::from) {
            let waiting = PathBuf::from(format!("{}.waiting", gate.display()));
            fs::write(&waiting, "").unwrap();
            wait_for_file(&gate);
        }
        let v =
            std::env::var("FAKE_AGENT_VERSION").unwrap_or_else(|_| "2.1.197 (Claude Code)".into());
        println!("{v}");
        if let Ok(secs) = std::env::var("FAKE_AGENT_VERSION_HOLD") {
            std::io::stdout().flush().unwrap();
            let holder = Command::new("sleep")
                .arg(secs)
                .stdin(Stdio::null())
                .process_group(0)
                .spawn()
                .unwrap();
            if let Some(dir) = std::env::var_os("FAKE_AGENT_RECORD").map(PathBuf::from) {
                fs::write(dir.join("version-holder.txt"), holder.id().to_string()).unwrap();
            }
        }
        return;
    }
    let record = std::env::var_os("FAKE_AGENT_RECORD").map(PathBuf::from);
    if let Some(dir) = &record {
        fs::create_dir_all(dir).unwrap();
        fs::write(
            dir.join("argv.json"),
            serde_json::to_string(&args[1..]).unwrap(),
        )
        .unwrap();
        fs::write(dir.join("env.json"), recorded_env().to_string()).unwrap();
        fs::write(
            dir.join("cwd.txt"),
            std::env::current_dir().unwrap().display().to_string(),
        )
        .unwrap();
        // Whole or absent: a test may read it the moment it appears. The temporary name is
        // this process's own: agents started together in one record dir (the conformance
        // scenarios, ticks side by side) each rename theirs, never another's.
        let tmp = dir.join(format!("pid.txt.{}.tmp", std::process::id()));
        fs::write(&tmp, std::process::id().to_string()).unwrap();
        fs::rename(&tmp, dir.join("pid.txt")).unwrap();
        // What this process inherited: owl's lock must not be among it.
        let fds: Vec<String> = fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| fs::read_link(e.ok()?.path()).ok())
            .map(|p| p.display().to_string())
            .collect();
        fs::write(dir.join("fds.txt"), fds.join("\n")).unwrap();
        // Each Run records its own stdin.
        let _ = fs::remove_file(dir.join("stdin.jsonl"));
    }
    let shared = Arc::new(Shared {
        out: Mutex::new(Some(std::io::stdout())),
        tee: Mutex::new(
            record
                .as_ref()
                .map(|d| fs::File::create(d.join("stdout.bin")).unwrap()),
        ),
        interrupted: AtomicBool::new(false),
        stdin_closed: AtomicBool::new(false),
        hang_after_interrupt: AtomicBool::new(false),
        deaf_to_interrupt: AtomicBool::new(false),
        prompt_seen: (Mutex::new(false), Condvar::new()),
        record,
    });
    std::thread::spawn({
        let shared = shared.clone();
        move || read_stdin(&shared)
    });

    let script_path =
        std::env::var("FAKE_AGENT_SCRIPT").expect("FAKE_AGENT_SCRIPT names the script");
    let script = fs::read_to_string(&script_path).unwrap_or_else(|_| "read-prompt\n".into());
    for raw in script.lines() {
        if shared.interrupted.load(Ordering::SeqCst) {
            break;
        }
        let line = raw.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (cmd, rest) = line.split_once(' ').unwrap_or((line, ""));
        match cmd {
            "read-prompt" => {
                let (lock, cv) = &shared.prompt_seen;
                let mut seen = lock.lock().unwrap();
                while !*seen && !shared.stdin_closed.load(Ordering::SeqCst) {
                    seen = cv.wait_timeout(seen, Duration::from_millis(50)).unwrap().0;
                }
                if !*seen {
                    // stdin closed with no prompt (owl's probe): the real CLI exits.
                    std::process::exit(0);
                }
            }
            "replay" => replay(&shared, rest),
            "emit" => shared.emit_line(rest),
            "emit-bytes" => shared.emit(&unescape(rest)),
            "emit-long" => {
                // Written in 1 MiB pieces so that this process stays small.
                let n: usize = rest.trim().parse().unwrap();
                shared.emit(b"{\"type\":\"assistant\",\"x\":\"");
                let piece = vec![b'a'; 1 << 20];
                let mut left = n;
                while left > 0 {
                    let k = left.min(piece.len());
                    shared.emit(&piece[..k]);
                    left -= k;
                }
                shared.emit(b"\"}\n");
            }
            "cat" => {
                use std::io::Read;
                let mut file = fs::File::open(rest.trim()).unwrap();
                let mut buf = vec![0u8; 1 << 20];
                loop {
                    let n = file.read(&mut buf).unwrap();
                    if n == 0 {
                        break;
                    }
                    shared.emit(&buf[..n]);
                }
            }
            "stderr" => eprintln!("{rest}"),
            "sleep" => sleep_unless_interrupted(&shared, rest.trim().parse().unwrap()),
            // N steps of modelled work (`FAKE_AGENT_PLAN`), each its rate_limit_event.
            "plan-work" => {
                for _ in 0..rest.trim().parse::<u32>().unwrap() {
                    if shared.interrupted.load(Ordering::SeqCst) {
                        break;
                    }
                    shared.emit_line(&plan::step());
                    sleep_unless_interrupted(&shared, 25);
                }
            }
            "write" => {
                let (path, text) = rest.split_once(' ').unwrap_or((rest, ""));
                let path = Path::new(path);
                if let Some(parent) = path.parent() {
                    fs::create_dir_all(parent).unwrap();
                }
                fs::write(path, unescape(text)).unwrap();
            }
            "commit" => {
                git(&["add", "-A"]);
                git(&[
                    "-c",
                    "user.name=Fake Agent",
                    "-c",
                    "user.email=agent@example.com",
                    "commit",
                    "-q",
                    // Like an agent that commits a step it already committed: no error.
                    "--allow-empty",
                    "-m",
                    rest,
                ]);
            }
            "proxy-connect" => {
                let target = rest.trim();
                net_log(&format!("{target} via proxy: {}", proxy_connect(target)));
            }
            "direct-connect" => {
                let target = rest.trim();
                let said = target
                    .parse::<std::net::SocketAddr>()
                    .map_err(|e| e.to_string())
                    .and_then(|a| {
                        std::net::TcpStream::connect_timeout(&a, Duration::from_secs(2))
                            .map(|_| "connected".to_string())
                            .map_err(|e| e.to_string())
                    })
                    .unwrap_or_else(|e| e);
                net_log(&format!("{target} direct: {said}"));
            }
            "try-write" => {
                // What a tool that writes outside its place would do: append a line, and
                // say in the record how it went (`PATH: ok` or `PATH: <error>`).
                let path = expand_home(rest.trim());
                let outcome = fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .and_then(|mut f| std::io::Write::write_all(&mut f, b"owl-escape\n"));
                let said = match outcome {
                    Ok(()) => "ok".to_string(),
                    Err(e) => e.to_string(),
                };
                if let Some(dir) = std::env::var_os("FAKE_AGENT_RECORD").map(PathBuf::from) {
                    let mut log = fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(dir.join("try-write.log"))
                        .unwrap();
                    std::io::Write::write_all(
                        &mut log,
                        format!("{}: {said}\n", path.display()).as_bytes(),
                    )
                    .unwrap();
                }
            }
            "hang-after-interrupt" => shared.hang_after_interrupt.store(true, Ordering::SeqCst),
            "deaf-to-interrupt" => shared.deaf_to_interrupt.store(true, Ordering::SeqCst),
            "ignore-sigterm" => unsafe {
                libc::signal(libc::SIGTERM, libc::SIG_IGN);
            },
            "note-sigterm" => unsafe {
                // Writes `sigterm` in the record and exits 143: proof the signal reached
                // this process, not only something around it. The path is made now: the
                // handler may only make async-signal-safe calls (an allocation or the
                // environment's lock in a handler can deadlock, and the agent is killed at
                // the grace's end without a word).
                if let Some(dir) = std::env::var_os("FAKE_AGENT_RECORD") {
                    let path = PathBuf::from(dir).join("sigterm");
                    let path =
                        std::ffi::CString::new(path.into_os_string().into_encoded_bytes()).unwrap();
                    let _ = SIGTERM_NOTE.set(path);
                }
                libc::signal(
                    libc::SIGTERM,
                    note_sigterm as extern "C" fn(libc::c_int) as libc::sighandler_t,
                );
            },
            "spawn-session" => {
                let mut cmd = Command::new("sleep");
                cmd.arg(rest.trim())
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null());
                unsafe {
                    cmd.pre_exec(|| {
                        libc::setsid();
                        Ok(())
                    });
                }
                let child = cmd.spawn().unwrap();
                note_child(&shared, child.id());
            }
            "spawn-holding" => {
                // Inherits our stdout: the pipe stays open after we exit.
                let child = Command::new("sleep")
                    .arg(rest.trim())
                    .stdin(Stdio::null())
                    .spawn()
                    .unwrap();
                note_child(&shared, child.id());
            }
            "close-stdout" => {
                shared.out.lock().unwrap().take();
                unsafe {
                    libc::close(1);
                }
            }
            "wait-stdin-eof" => {
                while !shared.stdin_closed.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            // Held until the test releases it by creating the file.
            "wait-file" | "wait-for" => wait_for_file(Path::new(rest.trim())),
            "fill-disk" => {
                let mut f = fs::File::create(rest.trim()).unwrap();
                let block = vec![b'x'; 64 * 1024];
                // Whole blocks, then what is left byte by byte: full to the last byte.
                while f.write_all(&block).is_ok() {}
                while f.write_all(b"x").is_ok() {}
            }
            // A tool the agent runs (its Bash tool): anything the Run's rights allow.
            "sh" => {
                let status = Command::new("/bin/sh")
                    .args(["-c", rest])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .status()
                    .unwrap();
                if !status.success() {
                    eprintln!("fake-agent: sh {rest}: {status}");
                }
            }
            "exit" => std::process::exit(rest.trim().parse().unwrap()),
            other => panic!("unknown script step '{other}'"),
        }
    }
    if shared.interrupted.load(Ordering::SeqCst) {
        // What the real CLI prints after an interrupt aborts a tool turn (interrupt-control-request.jsonl).
        replay_lines(&shared, "interrupt-control-request.jsonl 4 6", false);
        while !shared.stdin_closed.load(Ordering::SeqCst)
            || shared.hang_after_interrupt.load(Ordering::SeqCst)
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::process::exit(1);
    }
}

/// Waits (at most a minute, so a broken test cannot hang) until `path` exists.
fn wait_for_file(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A CLI that is the real one with a fault put between it and owl (`FAKE_AGENT_RELAY`: the
/// real binary). Every stdin line goes through to it, except a line holding
/// `FAKE_AGENT_RELAY_DROP`, which is dropped, and a line holding the text before the colon
/// of `FAKE_AGENT_RELAY_DELAY` (`text:ms`), which goes through that much later. Its stdout
/// and stderr are the real CLI's own. Only `--version` is answered here, with
/// `FAKE_AGENT_VERSION`.
fn relay(real: &Path, args: &[String]) -> ! {
    let mut child = Command::new(real)
        .args(args)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_child = child.stdin.take().unwrap();
    let drop_text = std::env::var("FAKE_AGENT_RELAY_DROP").ok();
    let delay = std::env::var("FAKE_AGENT_RELAY_DELAY").ok().and_then(|d| {
        let (text, ms) = d.rsplit_once(':')?;
        Some((text.to_string(), Duration::from_millis(ms.parse().ok()?)))
    });
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().split(b'\n') {
            let Ok(mut line) = line else { break };
            let text = String::from_utf8_lossy(&line).into_owned();
            if drop_text.as_deref().is_some_and(|d| text.contains(d)) {
                continue;
            }
            if let Some((_, wait)) = delay.as_ref().filter(|(d, _)| text.contains(d.as_str())) {
                std::thread::sleep(*wait);
            }
            line.push(b'\n');
            if to_child
                .write_all(&line)
                .and_then(|()| to_child.flush())
                .is_err()
            {
                break;
            }
        }
    });
    let status = child.wait().unwrap();
    std::process::exit(status.code().unwrap_or(1));
}

/// The variables of [`RECORDED_ENV`] this process has.
fn recorded_env() -> serde_json::Value {
    let env: serde_json::Map<String, serde_json::Value> = RECORDED_ENV
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v.into())))
        .collect();
    serde_json::Value::Object(env)
}

fn read_stdin(shared: &Shared) {
    let mut usage_answers: (Vec<String>, usize) = (
        std::env::var("FAKE_AGENT_USAGE")
            .ok()
            .and_then(|p| fs::read_to_string(p).ok())
            .map(|t| {
                t.lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default(),
        0,
    );
    let stdin = std::io::stdin();
    let mut log = shared.record.as_ref().map(|d| {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(d.join("stdin.jsonl"))
            .unwrap()
    });
    for line in BufReader::new(stdin.lock()).lines() {
        let Ok(line) = line else { break };
        if let Some(f) = log.as_mut() {
            let _ = writeln!(f, "{line}");
        }
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        match v["type"].as_str() {
            Some("user") => {
                let (lock, cv) = &shared.prompt_seen;
                *lock.lock().unwrap() = true;
                cv.notify_all();
            }
            Some("control_request") => {
                let id = v["request_id"].as_str().unwrap_or("");
                if v["request"]["subtype"] == "interrupt"
                    && shared.deaf_to_interrupt.load(Ordering::SeqCst)
                {
                    // Read, never answered: owl must go on to signals.
                } else if v["request"]["subtype"] == "interrupt" {
                    shared.emit_line(&format!(
                        r#"{{"type":"control_response","response":{{"subtype":"success","request_id":"{id}"}}}}"#
                    ));
                    shared.interrupted.store(true, Ordering::SeqCst);
                } else if v["request"]["subtype"] == "get_usage" {
                    if let Some(ms) = std::env::var("FAKE_AGENT_USAGE_DELAY_MS")
                        .ok()
                        .and_then(|ms| ms.parse().ok())
                    {
                        // A slow answer, as over a slow network.
                        std::thread::sleep(Duration::from_millis(ms));
                    }
                    if let Some(gate) = std::env::var_os("FAKE_AGENT_USAGE_GATE").map(PathBuf::from)
                    {
                        // A probe held before its answer, for as long as the test likes.
                        fs::write(format!("{}.waiting", gate.display()), "").unwrap();
                        wait_for_file(&gate);
                    }
                    let limits = match plan::on() {
                        true => plan::usage(),
                        false => next_usage(&mut usage_answers),
                    };
                    if limits == "no-plan" {
                        let recorded =
                            fs::read_to_string(Path::new(FIXTURE_DIR).join("not-logged-in.jsonl"))
                                .unwrap();
                        let first = recorded.lines().next().unwrap();
                        shared.emit_line(
                            &first.replace(
                                r#""request_id":"u1""#,
                                &format!(r#""request_id":"{id}""#),
                            ),
                        );
                        continue;
                    }
                    // The shape recorded in get-usage.jsonl, trimmed of the session details.
                    shared.emit_line(&format!(
                        r#"{{"type":"control_response","response":{{"subtype":"success","request_id":"{id}","response":{{"session":{{"total_cost_usd":0}},"subscription_type":"max","rate_limits_available":true,"rate_limits":{limits},"behaviors":{{}}}}}}}}"#
                    ));
                }
            }
            _ => {}
        }
    }
    shared.stdin_closed.store(true, Ordering::SeqCst);
    // Like the real CLI, a probe's EOF ends the wait for a prompt at once.
    let (lock, cv) = &shared.prompt_seen;
    let _seen = lock.lock().unwrap();
    cv.notify_all();
}

fn next_usage(answers: &mut (Vec<String>, usize)) -> String {
    let (lines, next) = answers;
    let Some(last) = lines.len().checked_sub(1) else {
        return "null".into();
    };
    let line = lines[(*next).min(last)].clone();
    *next += 1;
    line
}

fn replay(shared: &Shared, spec: &str) {
    replay_lines(shared, spec, true)
}

/// Prints transcript lines; `abortable`: stop at an interrupt, as a turn in progress does.
fn replay_lines(shared: &Shared, spec: &str, abortable: bool) {
    let mut parts = spec.split_whitespace();
    let file = parts.next().expect("replay FILE");
    let from: usize = parts.next().map_or(1, |s| s.parse().unwrap());
    let to: usize = parts.next().map_or(usize::MAX, |s| s.parse().unwrap());
    let path = if Path::new(file).is_absolute() {
        PathBuf::from(file)
    } else {
        Path::new(FIXTURE_DIR).join(file)
    };
    let text =
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if n < from || n > to {
            continue;
        }
        if abortable && shared.interrupted.load(Ordering::SeqCst) {
            return;
        }
        shared.emit_line(line);
    }
}

fn sleep_unless_interrupted(shared: &Shared, ms: u64) {
    let end = Instant::now() + Duration::from_millis(ms);
    while Instant::now() < end && !shared.interrupted.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn git(args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?} failed");
}

fn note_child(shared: &Shared, pid: u32) {
    if let Some(dir) = &shared.record {
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("children.txt"))
            .unwrap();
        writeln!(f, "{pid}").unwrap();
    }
}

fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            match b[i + 1] {
                b'n' => {
                    out.push(b'\n');
                    i += 2;
                }
                b'0' => {
                    out.push(0);
                    i += 2;
                }
                b'\\' => {
                    out.push(b'\\');
                    i += 2;
                }
                b'x' if i + 3 < b.len() => {
                    out.push(
                        u8::from_str_radix(std::str::from_utf8(&b[i + 2..i + 4]).unwrap(), 16)
                            .unwrap(),
                    );
                    i += 4;
                }
                _ => {
                    out.push(b[i]);
                    i += 1;
                }
            }
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// Not the agent: a small, clean parent that runs `command` and writes its peak RSS (KiB)
/// to `out`, exiting as it did. A process started straight from the test harness inherits
/// the harness's own peak at exec (the kernel carries a vfork parent's high-water mark into
/// the child's `maxrss`), which a busy harness makes meaningless.
fn peak_rss_of(out: &Path, command: &[String]) -> ! {
    let child = std::process::Command::new(&command[0])
        .args(&command[1..])
        .spawn()
        .unwrap();
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32);
    fs::write(out, usage.ru_maxrss.to_string()).unwrap();
    std::process::exit(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    });
}

/// `~/x` as `$HOME/x`.
fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// Where `note-sigterm` writes, made before its handler is installed.
static SIGTERM_NOTE: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();

extern "C" fn note_sigterm(_: libc::c_int) {
    // open, write, close and _exit only: all async-signal-safe.
    if let Some(path) = SIGTERM_NOTE.get() {
        unsafe {
            let fd = libc::open(
                path.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
                0o644,
            );
            if fd >= 0 {
                let said = b"got it";
                libc::write(fd, said.as_ptr().cast(), said.len());
                libc::close(fd);
            }
        }
    }
    unsafe { libc::_exit(143) };
}

/// Appends a line to net.log in the record dir.
fn net_log(line: &str) {
    if let Some(dir) = std::env::var_os("FAKE_AGENT_RECORD").map(PathBuf::from) {
        let mut log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("net.log"))
            .unwrap();
        std::io::Write::write_all(&mut log, format!("{line}\n").as_bytes()).unwrap();
    }
}

/// A tunnel through the proxy `HTTPS_PROXY` names to `target`, as curl asks for one:
/// `200 <the line the far end answered to ping>`, or the proxy's status, or the error.
fn proxy_connect(target: &str) -> String {
    use std::io::Write;
    let Some(proxy) = std::env::var("HTTPS_PROXY").ok() else {
        return "no HTTPS_PROXY".into();
    };
    let addr = proxy.trim_start_matches("http://").trim_end_matches('/');
    let mut conn = match std::net::TcpStream::connect(addr) {
        Ok(c) => c,
        Err(e) => return format!("proxy unreachable: {e}"),
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let ask = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
    if let Err(e) = conn.write_all(ask.as_bytes()) {
        return e.to_string();
    }
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut status = String::new();
    let _ = reader.read_line(&mut status);
    let code = status.split(' ').nth(1).unwrap_or("none").to_string();
    // The rest of the proxy's head.
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
    }
    if code != "200" {
        return code;
    }
    let _ = conn.write_all(b"ping\n");
    let mut answer = String::new();
    let _ = reader.read_line(&mut answer);
    format!("200 {}", answer.trim())
}
