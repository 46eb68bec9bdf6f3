//! Prints the performance figures of docs/performance.md, each beside a baseline measured
//! in the same run (`/bin/true`, `cat`, `jq`), as a ratio.
//!
//! Run: `cargo bench --bench performance`. It builds the state it measures through owl's
//! own store code: 10,000 Jobs (1,000 of them queued behind a ceiling), 100,000 Runs and
//! 1,000,000 Snapshots, and a 1 GiB stream of real-shaped stream-json. The database lives
//! on /dev/shm when there is one (seeding 200,000 transactions on a disk would take
//! minutes); reads come from the page cache either way.

#[path = "../tests/integration/support.rs"]
#[allow(dead_code)]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

const OWL: &str = env!("CARGO_BIN_EXE_owl");
const AGENT: &str = env!("CARGO_BIN_EXE_owl-fake-agent");
const NOW: &str = "2026-11-30T03:00:00Z";

fn main() {
    let scratch = scratch_dir();
    println!("owl performance figures (medians; ratios to a baseline from the same run)");
    println!("  scratch space: {}", scratch.path().display());
    // Each figure is paired with /bin/true measured round by round beside it, so that a
    // machine busy for a moment slows both: the ratio is what is compared to the goal.
    let truth = median(15, || time(Command::new("/bin/true")));
    println!("  /bin/true at the start: {truth:?}");
    let ratio = |d: Duration| d.as_secs_f64() / truth.as_secs_f64();

    // An idle tick on an empty queue.
    let empty = World::new(scratch.path(), "empty");
    empty.owl(&["tick"]).output().unwrap();
    let (t, r) = paired(21, || time(empty.owl(&["tick"])));
    println!("  idle tick, empty queue: {t:?} = {r:.1}x /bin/true (goal <= 5x)");

    // The year-old database.
    let big = World::new(scratch.path(), "big");
    let seeded = Instant::now();
    let heavy_job = big.seed();
    println!(
        "  (seeded 10,001 Jobs, 100,000 Runs, 1,000,000 Snapshots in {:?})",
        seeded.elapsed()
    );
    big.owl(&["tick"]).output().unwrap();
    let (t, r) = paired(21, || time(big.owl(&["tick"])));
    println!(
        "  idle tick, 1,000 queued Jobs over a ceiling, 100k Runs, 1M Snapshots: {t:?} = {r:.1}x (goal <= 5x)"
    );
    let (t, r) = paired(21, || time(big.owl(&["status", "--json"])));
    println!("  status --json on that database: {t:?} = {r:.1}x (goal <= 10x)");
    let (t, r) = paired(15, || time(big.owl(&["jobs", "--all", "--json"])));
    println!("  jobs --all --json, 10k Jobs: {t:?} = {r:.1}x (goal <= 40x)");
    let (t, r) = paired(15, || time(big.owl(&["show", "--json", &heavy_job])));
    println!("  show JOB --json, 1,000 Runs: {t:?} = {r:.1}x (goal <= 20x)");
    let sqlite = [
        median(15, || time(big.owl(&["tick"]))),
        median(15, || time(big.owl(&["status", "--json"]))),
        median(9, || time(big.owl(&["jobs", "--all", "--json"]))),
    ];
    on_postgres(scratch.path(), &empty, &big, sqlite, &ratio);

    // A Run whose agent prints only init and result (no ceiling: no probe before it). The
    // Job leaves no Handoff, so it is queued again: each timed tick is one more Run of a
    // Job whose worktree exists. Its first Run, which makes the worktree, is shown apart.
    let run = World::with(scratch.path(), "run", false);
    run.script("read-prompt\nreplay success.jsonl 1 1\nreplay success.jsonl 3 3\n");
    run.owl(&[
        "add",
        "--repo",
        run.repo.to_str().unwrap(),
        "--max-runs",
        "1000",
        "Hello",
    ])
    .output()
    .unwrap();
    let first = time(run.owl(&["tick"]));
    let (t, r) = paired(21, || time(run.owl(&["tick"])));
    println!(
        "  tick running an agent that prints only init and result: {t:?} = {r:.1}x (goal <= 10x); \
         a Job's first Run, making its worktree: {first:?} = {:.1}x",
        ratio(first)
    );
    let run_db = support::pg_server::Database::new();
    let run_pg = run.on_store(scratch.path(), "run-pg", &run_db.url());
    run_pg
        .owl(&[
            "add",
            "--repo",
            run.repo.to_str().unwrap(),
            "--max-runs",
            "1000",
            "Hello",
        ])
        .output()
        .unwrap();
    time(run_pg.owl(&["tick"]));
    let (tp, rp) = paired(21, || time(run_pg.owl(&["tick"])));
    println!(
        "  on PostgreSQL: tick running that agent: {tp:?} = {rp:.1}x /bin/true, {:.1}x SQLite's",
        tp.as_secs_f64() / t.as_secs_f64()
    );

    // Ingest: 1 GiB of real-shaped stream-json through a tick.
    let stream = scratch.path().join("stream.jsonl");
    let bytes = write_stream(&stream, 1 << 30);
    let ingest = World::new(scratch.path(), "ingest");
    ingest.script(&format!(
        "read-prompt\ncat {}\nreplay success.jsonl 3 3\n",
        stream.display()
    ));
    ingest
        .owl(&["add", "--repo", ingest.repo.to_str().unwrap(), "Stream"])
        .output()
        .unwrap();
    let owl_time = time(ingest.owl(&["tick"]));
    let copy = scratch.path().join("copy.jsonl");
    let cat_time = time_shell(&format!(
        "cat {} | cat > {}",
        stream.display(),
        copy.display()
    ));
    let _ = std::fs::remove_file(&copy);
    let mbps = |d: Duration| bytes as f64 / d.as_secs_f64() / 1e6;
    println!(
        "  ingest of {:.2} GiB through owl tick: {:.0} MB/s = {:.0}% of `cat | cat > file` ({:.0} MB/s) (goal >= 30%)",
        bytes as f64 / (1u64 << 30) as f64,
        mbps(owl_time),
        100.0 * cat_time.as_secs_f64() / owl_time.as_secs_f64(),
        mbps(cat_time)
    );
    if Command::new("jq").arg("--version").output().is_ok() {
        let jq_time = time_shell(&format!("jq -c . {} > /dev/null", stream.display()));
        println!(
            "  baseline jq -c . on the same stream: {:.0} MB/s; owl is {:.1}x jq (goal >= 3x)",
            mbps(jq_time),
            jq_time.as_secs_f64() / owl_time.as_secs_f64()
        );
    } else {
        println!("  baseline jq: not installed, not measured");
    }
    let _ = std::fs::remove_file(&stream);

    // Peak memory on a line just under the 16 MiB cap.
    let rss = World::new(scratch.path(), "rss");
    rss.script(&format!(
        "read-prompt\nreplay success.jsonl 1 1\nemit-long {}\nreplay success.jsonl 3 3\n",
        (16 << 20) - 64
    ));
    rss.owl(&["add", "--repo", rss.repo.to_str().unwrap(), "Big"])
        .output()
        .unwrap();
    let peak = peak_rss_kib(rss.owl(&["tick"]));
    println!(
        "  peak RSS of a tick (with its waited-for children) on a line just under 16 MiB: {:.1} MiB (goal <= 32 MiB)",
        peak as f64 / 1024.0
    );
}

/// The same figures with the state in PostgreSQL (the test server, `.ci/postgres`): the
/// year-old state copied there by `owl store copy`, each figure beside `/bin/true` and beside
/// SQLite's from the same run. An idle tick on an empty store, against SQLite's, says what
/// a connection's setup costs.
fn on_postgres(
    scratch: &Path,
    empty: &World,
    big: &World,
    sqlite: [Duration; 3],
    ratio: &dyn Fn(Duration) -> f64,
) {
    let fresh = support::pg_server::Database::new();
    let empty_pg = empty.on_store(scratch, "empty-pg", &fresh.url());
    empty_pg.owl(&["tick"]).output().unwrap();
    let sqlite_empty = median(15, || time(empty.owl(&["tick"])));
    let (t, r) = paired(21, || time(empty_pg.owl(&["tick"])));
    println!(
        "  on PostgreSQL: idle tick, empty queue: {t:?} = {r:.1}x /bin/true; SQLite's {sqlite_empty:?}: \
         a connection's setup (TCP, login by SCRAM, the schema check) costs {:?}",
        t.saturating_sub(sqlite_empty)
    );
    let db = support::pg_server::Database::new();
    let copied = Instant::now();
    let out = big
        .owl(&["store", "copy", "--to", &db.url()])
        .env("PGPASSWORD", support::pg_server::PASSWORD)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "store copy: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!(
        "  (copied the year-old state into PostgreSQL in {:?})",
        copied.elapsed()
    );
    let pg = big.on_store(scratch, "big-pg", &db.url());
    pg.owl(&["tick"]).output().unwrap();
    let rows = [
        (
            "idle tick, 1,000 queued Jobs over a ceiling",
            vec!["tick"],
            21,
        ),
        ("status --json", vec!["status", "--json"], 21),
        (
            "jobs --all --json, 10k Jobs",
            vec!["jobs", "--all", "--json"],
            9,
        ),
    ];
    for ((what, args, rounds), sqlite) in rows.into_iter().zip(sqlite) {
        let (t, r) = paired(rounds, || time(pg.owl(&args)));
        println!(
            "  on PostgreSQL: {what}: {t:?} = {r:.1}x /bin/true, {:.1}x SQLite's {sqlite:?} ({:.1}x)",
            t.as_secs_f64() / sqlite.as_secs_f64(),
            ratio(sqlite)
        );
    }
}

/// A state dir, a config and a repository for one figure.
struct World {
    root: PathBuf,
    repo: PathBuf,
    config: PathBuf,
    script: PathBuf,
}

impl World {
    /// A world whose Account has a ceiling (`fiveHourMax: 60`) when `ceiling`.
    fn new(scratch: &Path, name: &str) -> World {
        World::with(scratch, name, true)
    }

    fn with(scratch: &Path, name: &str, ceiling: bool) -> World {
        let root = scratch.join(name);
        let repo = root.join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        support::git(&repo, &["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("README.md"), "demo\n").unwrap();
        support::git(&repo, &["add", "README.md"]);
        support::git(&repo, &["commit", "-q", "-m", "initial"]);
        // A plan login, as the real CLI leaves it: an Account whose store shows none is not
        // scheduled, and its tick would measure nothing.
        std::fs::create_dir_all(root.join("creds")).unwrap();
        std::fs::write(
            root.join("creds/.credentials.json"),
            support::LOGGED_IN_STORE,
        )
        .unwrap();
        let config = root.join("config.yaml");
        std::fs::write(
            &config,
            format!(
                "stateDir: {}\ngraceWindow: 2s\nminFreeSpace: 0\ndrivers:\n  claude-code:\n    command: {AGENT}\n\
                 accounts:\n  work:\n    credentialStore: {}\n{}",
                root.join("state").display(),
                root.join("creds").display(),
                if ceiling { "    limits: {fiveHourMax: 60}\n" } else { "" }
            ),
        )
        .unwrap();
        World {
            script: root.join("agent.script"),
            root,
            repo,
            config,
        }
    }

    fn script(&self, text: &str) {
        std::fs::write(&self.script, text).unwrap();
    }

    /// This world with its state in the PostgreSQL store `url`: its own config (the same,
    /// plus `store:`), named `name` under the scratch dir; the repository and logins are
    /// this world's.
    fn on_store(&self, scratch: &Path, name: &str, url: &str) -> World {
        let root = scratch.join(name);
        std::fs::create_dir_all(&root).unwrap();
        let config = root.join("config.yaml");
        let text = std::fs::read_to_string(&self.config).unwrap();
        std::fs::write(&config, format!("{text}store: {url}\n")).unwrap();
        World {
            root: self.root.clone(),
            repo: self.repo.clone(),
            config,
            script: self.script.clone(),
        }
    }

    fn owl(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(OWL);
        cmd.args(args)
            .env("OWL_CONFIG", &self.config)
            .env("OWL_NOW", NOW)
            .env("HOME", &self.root)
            .env("TZ", "UTC")
            .env("PGPASSWORD", support::pg_server::PASSWORD)
            .env("FAKE_AGENT_SCRIPT", &self.script)
            // The fake agent talks to no API; a probe told "unknown" checks that the API
            // takes a connection (issue 23), and finds this loopback one.
            .env("ANTHROPIC_BASE_URL", support::loopback_api())
            .env_remove("FAKE_AGENT_RECORD")
            .env_remove("OWL_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    }

    /// A year of nights: 9,000 done Jobs of 11 Runs each, one done Job of 1,000 Runs (its
    /// id is returned), 1,000 queued Jobs, and a million Snapshots over the last 30 days, the
    /// newest over the ceiling. owl makes its state and schema (`owl tick --dry-run`); the
    /// history is written as owl's store writes its rows, in one transaction (owl's crate
    /// exports no store: it is a binary).
    fn seed(&self) -> String {
        assert!(self.owl(&["tick", "--dry-run"]).status().unwrap().success());
        let mut db = rusqlite::Connection::open(self.root.join("state/owl.db")).unwrap();
        let now: DateTime<Utc> = NOW.parse().unwrap();
        let at = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let tx = db.transaction().unwrap();
        let repo = self.repo.display().to_string();
        let mut job = tx
            .prepare(
                "INSERT INTO jobs (id, prompt, repo, base, account, priority, max_runs, \
                 max_run_time_secs, max_budget_usd, permission_mode, allowed_tools, \
                 disallowed_tools, state, created_at, updated_at, base_commit) \
                 VALUES (?1, ?2, ?3, 'HEAD', 'work', 0, 2000, 3600, 5.0, 'dontAsk', \
                 '[\"Read\",\"Edit\"]', '[]', 'queued', ?4, ?4, \
                 '0000000000000000000000000000000000000000')",
            )
            .unwrap();
        let mut run = tx
            .prepare(
                "INSERT INTO runs (job_id, account, agent_version, owl_pid, started_at, \
                 budget_usd, executor, outcome, cost_usd, num_turns, permission_denials, \
                 api_retries, ended_at, cause) \
                 VALUES (?1, 'work', '2.1.197', 1, ?2, 5.0, 'local', 'succeeded', 0.05, 3, \
                 '[]', 0, ?3, 'job')",
            )
            .unwrap();
        let mut done = tx
            .prepare("UPDATE jobs SET state = 'done', updated_at = ?2 WHERE id = ?1")
            .unwrap();
        // Runs end one every five minutes, back from now: 100,000 of them span a year.
        let mut ended = 0i64;
        let mut add = |i: usize, runs: usize| {
            let id = format!("job{i:05}");
            let prompt = format!("Job {i}: make the flaky test deterministic; commit as you go.");
            job.execute(rusqlite::params![id, prompt, repo, at(now)])
                .unwrap();
            for _ in 0..runs {
                ended += 1;
                let started = now - chrono::Duration::minutes((100_001 - ended) * 5 + 4);
                let end = started + chrono::Duration::minutes(4);
                run.execute(rusqlite::params![id, at(started), at(end)])
                    .unwrap();
            }
            if runs > 0 {
                done.execute(rusqlite::params![id, at(now)]).unwrap();
            }
        };
        for i in 0..9_000 {
            add(i, 11);
        }
        add(9_000, 1_000);
        for i in 9_001..10_001 {
            add(i, 0);
        }
        drop((job, run, done));
        let mut history = tx
            .prepare(
                "INSERT INTO snapshots (account, window, percent, resets_at, observed_at, source) \
                 VALUES ('work', ?1, ?2, ?3, ?4, 'get_usage')",
            )
            .unwrap();
        let resets = at(now + chrono::Duration::hours(2));
        for i in 0..1_000_000i64 {
            let observed = now - chrono::Duration::seconds((1_000_000 - i) * 2);
            let window = if i % 2 == 0 { "five_hour" } else { "seven_day" };
            let percent = if i >= 999_998 { 95.0 } else { (i % 50) as f64 };
            history
                .execute(rusqlite::params![window, percent, resets, at(observed)])
                .unwrap();
        }
        drop(history);
        // The newest figure per Window, as owl keeps it beside the history.
        tx.execute(
            "INSERT INTO latest_snapshots (account, window, percent, resets_at, observed_at, source) \
             SELECT account, window, percent, resets_at, observed_at, source FROM snapshots \
             WHERE id IN (SELECT MAX(id) FROM snapshots GROUP BY account, window)",
            [],
        )
        .unwrap();
        tx.commit().unwrap();
        "job09000".into()
    }
}

/// Somewhere to put the state: /dev/shm when there is one.
fn scratch_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    let mut dir = if shm.is_dir() {
        tempfile::Builder::new()
            .prefix("owl-perf")
            .tempdir_in(shm)
            .unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    // OWL_BENCH_KEEP=1 keeps the worlds, to profile a command against them by hand.
    if std::env::var_os("OWL_BENCH_KEEP").is_some() {
        dir.disable_cleanup(true);
    }
    dir
}

fn time(mut cmd: Command) -> Duration {
    let started = Instant::now();
    let status = cmd.status().unwrap();
    let took = started.elapsed();
    assert!(status.success(), "{cmd:?} failed");
    took
}

fn time_shell(line: &str) -> Duration {
    time({
        let mut c = Command::new("/bin/sh");
        c.args(["-c", line]);
        c
    })
}

/// The command's median time and its ratio to /bin/true's median, the two measured in
/// alternation, round by round.
fn paired(rounds: usize, mut measure: impl FnMut() -> Duration) -> (Duration, f64) {
    let mut truth = Vec::with_capacity(rounds);
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        truth.push(time(Command::new("/bin/true")));
        times.push(measure());
    }
    truth.sort();
    times.sort();
    let (t, base) = (times[rounds / 2], truth[rounds / 2]);
    (t, t.as_secs_f64() / base.as_secs_f64())
}

fn median(rounds: usize, mut measure: impl FnMut() -> Duration) -> Duration {
    let mut times: Vec<Duration> = (0..rounds).map(|_| measure()).collect();
    times.sort();
    times[rounds / 2]
}

/// A stream shaped like the CLI's: init, then assistant, tool-use and tool-result lines
/// from the recorded transcripts, repeated to `size` bytes; returns the bytes written.
fn write_stream(path: &Path, size: u64) -> u64 {
    use std::io::Write;
    let lines: Vec<String> = ["tool-use.jsonl", "success.jsonl"]
        .iter()
        .flat_map(|f| {
            support::fixture(f)
                .lines()
                .filter(|l| l.contains("\"type\":\"assistant\"") || l.contains("\"type\":\"user\""))
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect();
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let init = support::fixture("success.jsonl")
        .lines()
        .next()
        .unwrap()
        .to_string();
    writeln!(out, "{init}").unwrap();
    let mut written = init.len() as u64 + 1;
    'fill: loop {
        for line in &lines {
            writeln!(out, "{line}").unwrap();
            written += line.len() as u64 + 1;
            if written >= size {
                break 'fill;
            }
        }
    }
    out.flush().unwrap();
    written
}

/// Runs a command and returns its peak RSS (KiB, with its waited-for children) from wait4.
fn peak_rss_kib(mut cmd: Command) -> i64 {
    #[allow(clippy::zombie_processes)] // reaped by wait4 below
    let child = cmd.spawn().unwrap();
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    usage.ru_maxrss
}
