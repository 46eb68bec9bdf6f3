//! Issue 48: owl watched the way the system's own jobs are: its log lines reach systemd's
//! journal with their level.

use std::os::unix::fs::MetadataExt;

use crate::support::TestEnv;

/// Runs `owl ARGS` with stderr a file, `JOURNAL_STREAM` naming `stream` (`None`: that
/// file, as systemd names the stream it gives a service); its stderr.
fn stderr_of(env: &TestEnv, args: &[&str], stream: Option<&str>) -> String {
    let path = env.dir.path().join("stderr");
    let file = std::fs::File::create(&path).unwrap();
    let meta = file.metadata().unwrap();
    let named = stream.map_or(format!("{}:{}", meta.dev(), meta.ino()), String::from);
    let status = env
        .owl_std()
        .args(args)
        .env("JOURNAL_STREAM", named)
        .env("OWL_LOG", "owl=debug")
        .stdout(std::process::Stdio::null())
        .stderr(file)
        .status()
        .unwrap();
    assert!(!status.success(), "owl {args:?} was to fail");
    std::fs::read_to_string(&path).unwrap()
}

#[test]
fn under_systemd_each_log_line_reaches_the_journal_with_its_level() {
    let env = TestEnv::new();
    env.add("Something to show");
    let journal = stderr_of(&env, &["show", "nosuchjob"], None);
    let lines: Vec<&str> = journal.lines().collect();
    // Debug lines as priority 7, owl's last line (the error) as 3; no time, no level word.
    assert!(lines.iter().any(|l| l.starts_with("<7>")), "{journal}");
    let last = lines.last().copied().unwrap_or_default();
    assert!(last.starts_with("<3>owl: "), "{journal}");
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with('<') && !l.contains(" DEBUG ")),
        "{journal}"
    );
    // A stderr the journal does not hold (redirected by a script that inherited the
    // variable) gets the person's lines.
    let elsewhere = stderr_of(&env, &["show", "nosuchjob"], Some("1:1"));
    assert!(
        !elsewhere.contains("<7>") && !elsewhere.contains("<3>"),
        "{elsewhere}"
    );
    assert!(elsewhere.contains("DEBUG"), "{elsewhere}");
    assert!(elsewhere
        .lines()
        .last()
        .unwrap_or_default()
        .starts_with("owl: "));
}

/// An env whose config names a metrics file; its path.
fn with_metrics(env: &TestEnv) -> std::path::PathBuf {
    let file = env.dir.path().join("textfile").join("owl.prom");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let accounts = env.accounts_block(&["work"]);
    env.write_config(&format!("metricsFile: {}\n{accounts}", file.display()));
    file
}

/// The samples of a metrics file: `name{labels}` to value; every line a help, a type or a
/// sample, every metric with one help and one type line before its samples.
fn samples(text: &str) -> std::collections::BTreeMap<String, f64> {
    assert!(text.ends_with('\n'), "a torn file: {text:?}");
    let mut helped = std::collections::BTreeSet::new();
    let mut out = std::collections::BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap();
            assert!(helped.insert(name.to_string()), "two help lines for {name}");
            continue;
        }
        if line.starts_with("# TYPE ") {
            continue;
        }
        let (key, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line:?}"));
        let name = key.split('{').next().unwrap();
        assert!(helped.contains(name), "{name} sampled before its help line");
        out.insert(key.to_string(), value.parse::<f64>().unwrap());
    }
    out
}

fn engine() -> &'static str {
    match std::env::var("OWL_TEST_STORE").as_deref() {
        Ok("postgres") => "postgres",
        _ => "sqlite",
    }
}

#[test]
fn every_tick_writes_what_monitoring_reads_and_a_failed_one_keeps_the_last_success() {
    let mut env = TestEnv::new();
    let file = with_metrics(&env);
    env.now = "2026-11-30T03:00:00Z".into();
    env.script(&crate::support::done_script("success.jsonl", 0));
    env.add("Work for the metrics");
    assert_eq!(env.tick()["action"], "ran");
    let at_three = chrono::DateTime::parse_from_rfc3339("2026-11-30T03:00:00Z")
        .unwrap()
        .timestamp() as f64;
    let m = samples(&std::fs::read_to_string(&file).unwrap());
    assert_eq!(m["owl_last_tick_timestamp_seconds"], at_three, "{m:?}");
    assert_eq!(m["owl_last_success_timestamp_seconds"], at_three);
    let build = format!(
        "owl_build_info{{version=\"{}\",store=\"{}\"}}",
        env!("CARGO_PKG_VERSION"),
        engine()
    );
    assert_eq!(m.get(&build), Some(&1.0), "{m:?}");
    assert_eq!(m["owl_jobs{state=\"done\"}"], 1.0);
    assert_eq!(
        m["owl_runs_total{account=\"work\",outcome=\"succeeded\"}"],
        1.0
    );
    assert_eq!(m["owl_account_schedulable{account=\"work\"}"], 1.0);
    // A tick that fails (a bad --account) moves the last tick, not the last success.
    env.now = "2026-11-30T03:05:00Z".into();
    env.owl()
        .args(["tick", "--account", "nosuch"])
        .assert()
        .code(2);
    let m = samples(&std::fs::read_to_string(&file).unwrap());
    assert_eq!(m["owl_last_tick_timestamp_seconds"], at_three + 300.0);
    assert_eq!(m["owl_last_success_timestamp_seconds"], at_three);
    // Nothing but the file is left in its directory.
    let left: Vec<_> = std::fs::read_dir(file.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, [std::ffi::OsString::from("owl.prom")]);
}

#[test]
fn a_tick_killed_while_writing_leaves_the_old_file_or_the_new_never_a_mix() {
    let env = TestEnv::new();
    let file = with_metrics(&env);
    env.script(&crate::support::done_script("success.jsonl", 0));
    for i in 0..3 {
        env.add(&format!("Job {i}"));
    }
    assert_eq!(env.tick()["action"], "ran");
    // Ticks killed at once (SIGKILL) at every moment of their lives, beside others that
    // end: the file reads whole each time.
    for round in 0..30 {
        let mut tick = env.owl_std().arg("tick").spawn().unwrap();
        if round % 3 != 0 {
            // A moment later each round, from at once to a few milliseconds in.
            let deadline =
                std::time::Instant::now() + std::time::Duration::from_micros(300 * round);
            while std::time::Instant::now() < deadline {
                std::hint::spin_loop();
            }
            let _ = tick.kill();
        }
        let _ = tick.wait();
        samples(&std::fs::read_to_string(&file).unwrap());
    }
}

#[test]
#[ignore = "needs promtool (Debian's prometheus package)"]
fn e2e_the_metrics_file_passes_promtool() {
    let env = TestEnv::new();
    let file = with_metrics(&env);
    std::fs::write(
        &env.usage,
        r#"{"five_hour":{"utilization":41,"resets_at":"2026-11-30T05:00:00.000Z"},"seven_day":{"utilization":20,"resets_at":"2026-12-04T00:00:00.000Z"}}"#,
    )
    .unwrap();
    env.owl().args(["probe", "work"]).assert().success();
    env.script(&crate::support::done_script("success.jsonl", 0));
    env.add("Work");
    assert_eq!(env.tick()["action"], "ran");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains("owl_window_utilization_ratio{account=\"work\",window=\"five_hour\"} 0.41"),
        "{text}"
    );
    let promtool = std::env::var_os("OWL_E2E_PROMTOOL").expect("OWL_E2E_PROMTOOL");
    let out = std::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&file).unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_file_reads_whole_while_runs_start_and_end_on_three_accounts() {
    let env = TestEnv::new();
    let file = env.dir.path().join("owl.prom");
    let accounts = env.accounts_block(&["work", "two", "three"]);
    env.write_config(&format!("metricsFile: {}\n{accounts}", file.display()));
    env.script(&crate::support::done_script("success.jsonl", 0));
    for i in 0..6 {
        env.add(&format!("Job {i}"));
    }
    let mut ticks: Vec<std::process::Child> = (0..6).map(|_| env.spawn_tick()).collect();
    let mut reads = 0;
    while ticks.iter_mut().any(|t| t.try_wait().unwrap().is_none()) {
        if let Ok(text) = std::fs::read_to_string(&file) {
            samples(&text);
            reads += 1;
        }
    }
    for tick in ticks {
        let _ = tick.wait_with_output();
    }
    let m = samples(&std::fs::read_to_string(&file).unwrap());
    let ran: f64 = m
        .iter()
        .filter(|(k, _)| k.starts_with("owl_runs_total{"))
        .map(|(_, v)| v)
        .sum();
    assert!(ran >= 3.0, "{m:?}");
    assert!(reads > 0, "the file was never there while the ticks ran");
}

#[test]
#[ignore = "needs promtool (Debian's prometheus package)"]
fn e2e_the_readmes_alert_rule_is_one_prometheus_reads() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme
        .find("- alert: OwlStopped")
        .expect("the alert in README");
    let rule = &readme[start..start + readme[start..].find("```").unwrap()];
    let rules = format!(
        "groups:\n  - name: owl\n    rules:\n{}",
        rule.lines()
            .map(|l| format!("      {l}\n"))
            .collect::<String>()
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("owl.rules.yml");
    std::fs::write(&path, &rules).unwrap();
    let promtool = std::env::var_os("OWL_E2E_PROMTOOL").expect("OWL_E2E_PROMTOOL");
    let out = std::process::Command::new(promtool)
        .args(["check", "rules"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}\n{rules}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
