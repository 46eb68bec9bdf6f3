//! The first week, as a new user lives it (issue 36): every word true, every step works as
//! printed, nothing waits behind another.

use crate::support::{stderr_of, TestEnv};

#[test]
fn add_from_a_subdirectory_takes_the_repository_git_would_and_says_so() {
    let env = TestEnv::new();
    let sub = env.repo.join("src/deep");
    std::fs::create_dir_all(&sub).unwrap();
    let top = env.repo.canonicalize().unwrap();
    // From the subdirectory, as cwd.
    let out = env
        .owl_std()
        .current_dir(&sub)
        .args(["add", "From below"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(env.show(&id)["repo"], top.display().to_string());
    let said = stderr_of(&out);
    assert!(
        said.contains("is inside the repository") && said.contains(&top.display().to_string()),
        "{said}"
    );
    // And as --repo.
    let out = env
        .owl()
        .args(["add", "--repo"])
        .arg(&sub)
        .arg("With --repo")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(env.show(&id)["repo"], top.display().to_string());
}

#[test]
fn no_helper_process_starts_in_the_callers_directory() {
    let env = TestEnv::new();
    env.script(&crate::support::done_script("success.jsonl", 0));
    env.add("Run from inside the repository");
    // A person runs the tick by hand from inside their repository.
    let out = env
        .owl_std()
        .current_dir(&env.repo)
        .args(["tick", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = env
        .owl_std()
        .current_dir(&env.repo)
        .args(["doctor"])
        .output()
        .unwrap();
    assert!(out.status.code().is_some(), "{out:?}");
    let calls = env.recorded("helper-cwd.txt");
    assert!(
        calls.contains("--version") && calls.contains("auth status"),
        "{calls}"
    );
    let repo = env.repo.display().to_string();
    for call in calls.lines() {
        assert!(
            !call.ends_with(&repo),
            "a helper started in the caller's directory: {call}"
        );
    }
}

#[test]
fn a_report_over_a_day_or_more_dates_its_ends() {
    let env = TestEnv::new();
    env.add("Anything");
    let out = env
        .owl()
        .args(["report", "--since", "7d"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.lines().next(),
        Some("owl report: Mon 23 Nov 03:00 → Mon 30 Nov 03:00"),
        "{text}"
    );
    let page = crate::report::html_report(&env, "7d");
    assert!(
        page.contains("owl report: Mon 23 Nov 03:00 → Mon 30 Nov 03:00"),
        "{page}"
    );
}

#[test]
fn status_says_verified_for_a_verified_jobs_check() {
    let env = TestEnv::new();
    env.script(&crate::support::done_script("success.jsonl", 0));
    env.add_with(&["--check", "true"], "Verified");
    assert_eq!(env.tick()["job_state"], "done");
    let out = env.owl().arg("status").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("check: verified: `true` passed"), "{text}");
}

#[test]
fn a_job_queued_after_an_interrupted_run_says_what_happened_not_that_it_waits_for_it() {
    let env = TestEnv::new();
    env.script(&crate::support::held_run_script(&env.release_file(), ""));
    let id = env.add("Interrupted");
    let tick = env.spawn_tick();
    env.wait_running();
    unsafe { libc::kill(tick.id() as i32, libc::SIGINT) };
    let out = tick.wait_with_output().unwrap();
    assert!(out.status.code().is_some(), "{out:?}");
    let shown = env.show(&id);
    assert_eq!(shown["state"], "queued", "{shown}");
    let reason = shown["reason"].as_str().unwrap();
    assert!(!reason.starts_with("waiting"), "{reason}");
    assert!(reason.contains("its last Run was stopped"), "{reason}");
}

#[test]
fn logs_show_the_clis_interrupt_as_owls_not_as_an_empty_tool_result() {
    let env = TestEnv::new();
    // The real CLI's turn cut short by owl's interrupt, as recorded.
    env.script("read-prompt\nreplay interrupt-control-request.jsonl\nwait-stdin-eof\n");
    let id = env.add("Interrupted");
    env.tick();
    let logs = env.owl().args(["logs", &id]).output().unwrap();
    let logs = String::from_utf8_lossy(&logs.stdout);
    assert!(logs.contains("[interrupted by owl]"), "{logs}");
    assert!(!logs.contains("[tool result]\n"), "{logs}");
}

#[test]
fn once_a_run_started_on_an_account_its_login_is_not_called_unchecked() {
    let env = TestEnv::with_config("    limits: {fiveHourMax: 60}\n");
    // The CLI's `auth status` said logged in, the Run started, and ended without a figure.
    env.script("read-prompt\nexit 1\n");
    env.add_with(&["--max-runs", "1"], "First");
    let tick = env.tick();
    assert_eq!(tick["action"], "ran", "{tick}");
    env.add("Second");
    let out = env.owl().arg("status").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("login is not checked yet"), "{text}");
    assert!(text.contains("utilization is not known yet"), "{text}");
}

#[test]
fn the_embedded_defaults_account_without_a_login_is_not_called_schedulable() {
    let home = tempfile::tempdir().unwrap();
    let bin = home.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_owl-fake-agent"), bin.join("claude")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_owl"))
        .args(["status", "--json"])
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let account = &status["accounts"][0];
    assert_eq!(account["name"], "default", "{status}");
    assert_eq!(account["schedulable"], false, "{status}");
    let reason = account["reason"].as_str().unwrap();
    assert!(
        reason.contains("not logged in") && reason.contains(".claude"),
        "{reason}"
    );
}

#[test]
fn doctor_says_one_missing_login_once_with_the_whole_fix() {
    let mut env = TestEnv::new();
    env.extra_env.push((
        "FAKE_AGENT_AUTH".into(),
        r#"{"loggedIn":false,"authMethod":"none","apiProvider":"firstParty"}"#.into(),
    ));
    std::fs::write(&env.usage, "no-plan\n").unwrap();
    let out = env.owl().arg("doctor").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let fails: Vec<&str> = text.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert_eq!(fails.len(), 1, "{text}");
    assert!(fails[0].contains("then `owl probe work`"), "{text}");
}

#[test]
fn show_and_status_give_a_job_the_same_reason_to_wait() {
    let env = TestEnv::with_config("schedule:\n  window: \"10:00-12:00\"\n");
    let id = env.add("Outside the window");
    let shown = env.show(&id);
    let now = shown["now"].as_str().unwrap();
    let status = env.status();
    let queued = status["queue"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["job_id"] == id.as_str())
        .unwrap();
    assert_eq!(now, queued["reason"].as_str().unwrap(), "{shown}\n{status}");
    assert!(now.contains("outside the schedule window"), "{now}");
}

#[test]
fn status_says_an_accounts_reason_once_and_refers_to_it_after() {
    let env = TestEnv::new();
    let store = env.dir.path().join("creds");
    std::fs::remove_file(store.join(".credentials.json")).unwrap();
    env.add("One");
    env.add("Two");
    let out = env.owl().arg("status").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let path = store.display().to_string();
    let (accounts, rest) = text.split_once("Queue,").unwrap();
    assert!(accounts.contains(&path), "{text}");
    assert!(!rest.contains(&path), "{text}");
    assert_eq!(
        text.matches("work: not logged in, see above").count(),
        3,
        "{text}"
    );
    // The JSON keeps every reason whole.
    let status = env.status();
    assert!(status["queue"][0]["reason"]
        .as_str()
        .unwrap()
        .contains(&path));
}

#[test]
fn a_plan_files_mistakes_are_told_as_config_yamls_are() {
    let env = TestEnv::new();
    for (name, text, says) in [
        (
            "plan.yaml",
            format!(
                "- repo: {r}\n  prompt: Fine\n- repo: {r}\n  promt: Typo\n",
                r = env.repo.display()
            ),
            "line 4: unknown key 'promt' in entry 2 (did you mean 'prompt'?)",
        ),
        (
            "plan.jsonl",
            format!(
                "{{\"repo\":\"{r}\",\"prompt\":\"a\"}}\n{{\"repo\":\"{r}\",\"promt\":\"b\"}}\n",
                r = env.repo.display()
            ),
            "line 2: unknown key 'promt' (did you mean 'prompt'?)",
        ),
    ] {
        let plan = env.dir.path().join(name);
        std::fs::write(&plan, text).unwrap();
        let out = env.add_from(&plan);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let err = stderr_of(&out);
        assert!(err.contains(says), "{err}");
        assert!(!err.contains("expected one of"), "{err}");
    }
}

/// Starts `cmd` with SIGINT ignored, as a script's background job has it.
fn with_sigint_ignored(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_IGN);
            Ok(())
        });
    }
}

#[test]
fn ctrl_c_during_the_preflight_probe_ends_the_tick_at_once_whatever_it_inherited() {
    for inherited_ignore in [false, true] {
        let mut env = TestEnv::with_config("    limits: {fiveHourMax: 60}\n");
        let gate = env.dir.path().join("usage.gate");
        env.extra_env
            .push(("FAKE_AGENT_USAGE_GATE".into(), gate.display().to_string()));
        env.script(&crate::support::done_script("success.jsonl", 0));
        let id = env.add("Probed first");
        let mut cmd = env.owl_std();
        cmd.args(["tick", "--json"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        if inherited_ignore {
            with_sigint_ignored(&mut cmd);
        }
        let mut tick = cmd.spawn().unwrap();
        let waiting = env.dir.path().join("usage.gate.waiting");
        crate::support::wait_for_child(&mut tick, "the probe never asked", || waiting.exists());
        unsafe { libc::kill(tick.id() as i32, libc::SIGINT) };
        let out = tick.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(1),
            "ignored {inherited_ignore}: {out:?}"
        );
        assert!(stderr_of(&out).contains("owl received SIGINT"), "{out:?}");
        let shown = env.show(&id);
        assert!(shown["runs"].as_array().unwrap().is_empty(), "{shown}");
        assert_eq!(shown["state"], "queued");
    }
}

#[test]
fn ctrl_c_during_doctor_conformance_ends_it_and_leaves_no_scratch_directory() {
    let mut env = TestEnv::new();
    let tmp = env.dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    env.extra_env
        .push(("TMPDIR".into(), tmp.display().to_string()));
    let scratch = || {
        std::fs::read_dir(&tmp)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("owl-conformance-")
            })
            .count()
    };
    // The probe scenario's get_usage is held, and every scenario's agent lives on (waiting
    // for a prompt, or working on it): the check is mid-way when the signal comes.
    env.script("read-prompt\nsleep 30000\n");
    let gate = env.dir.path().join("usage.gate");
    env.extra_env
        .push(("FAKE_AGENT_USAGE_GATE".into(), gate.display().to_string()));
    let mut doctor = env
        .owl_std()
        .args(["doctor", "--conformance"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let waiting = env.dir.path().join("usage.gate.waiting");
    crate::support::wait_for_child(&mut doctor, "the probe scenario never asked", || {
        waiting.exists()
    });
    assert!(scratch() > 0, "no scratch directory was made");
    unsafe { libc::kill(doctor.id() as i32, libc::SIGINT) };
    let out = doctor.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(128 + libc::SIGINT), "{out:?}");
    assert_eq!(scratch(), 0, "scratch directories were left");
    // The checks the stop cut short are no verdict: none is printed.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("FAIL"), "{stdout}");
}

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap()
}

#[test]
fn the_readme_puts_install_and_a_first_night_first() {
    let readme = readme();
    let heading = |h: &str| readme.find(h).unwrap_or_else(|| panic!("no {h}"));
    assert!(heading("## Install") < heading("## What owl promises"));
    assert!(heading("## Quick start") < heading("## What owl promises"));
    // Install starts within the first screenful or two.
    let line = readme[..heading("## Install")].lines().count();
    assert!(line < 40, "## Install is on line {line}");
}

#[test]
fn every_design_record_the_docs_cite_is_said_in_the_repository() {
    let root = env!("CARGO_MANIFEST_DIR");
    let decisions = std::fs::read_to_string(format!("{root}/docs/decisions.md")).unwrap();
    let mut texts = vec![readme()];
    for entry in std::fs::read_dir(format!("{root}/docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            texts.push(std::fs::read_to_string(path).unwrap());
        }
    }
    for text in texts {
        for (i, _) in text.match_indices("ADR-") {
            let id = &text[i..i + 8];
            assert!(
                decisions.contains(&format!("| {id} |")),
                "{id} is not in docs/decisions.md"
            );
        }
    }
}

#[test]
fn the_readme_says_what_the_cli_install_needs_and_where_report_night_is() {
    let readme = readme();
    let install = readme
        .split("## Install")
        .nth(1)
        .unwrap()
        .split("## Quick start")
        .next()
        .unwrap();
    assert!(install.contains("Node.js 22 or newer"), "{install}");
    assert!(
        install.contains("`~/.local/bin` must be on your `PATH`"),
        "{install}"
    );
    assert!(!install.contains("runs any 2.1.x"), "{install}");
    let report = readme
        .split("## The morning report")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    assert!(report.contains("owl report --night"), "{report}");
}

#[test]
fn ci_keeps_what_it_installs_and_caches_under_target() {
    let run = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/run")).unwrap();
    for line in [
        r#"export npm_config_cache="$PWD/target/npm-cache""#,
        r#"export HOME="$PWD/target/ci-home""#,
    ] {
        assert!(run.contains(line), "{line}");
    }
    // Set before anything is installed or run; the real CLIs it runs itself write their
    // temp files under target/ too.
    let first_install = run.find("npm install").unwrap();
    assert!(run.find("export HOME=").unwrap() < first_install);
    assert!(run.contains(r#"TMPDIR="$ci_tmp" "$GEMINI_BIN" --version"#));
}

/// Three Accounts with a ceiling and no figure yet, one Job bound to each, each Account's
/// probe held at a gate of its own.
fn three_gated_accounts() -> (TestEnv, Vec<std::path::PathBuf>, Vec<String>) {
    let env = TestEnv::new();
    let names = ["a", "b", "c"];
    let mut body = env.accounts_block(&names);
    let gates: Vec<std::path::PathBuf> = names
        .iter()
        .map(|n| env.dir.path().join(format!("gate-{n}")))
        .collect();
    for (name, gate) in names.iter().zip(&gates) {
        body = body.replace(
            &format!("  {name}:\n"),
            &format!(
                "  {name}:\n    limits: {{fiveHourMax: 60}}\n    env: {{FAKE_AGENT_USAGE_GATE: {}}}\n",
                gate.display()
            ),
        );
    }
    env.write_config(&body);
    env.five_hour(&[10.0], "2026-11-30T05:00:00.000Z");
    env.script(&crate::support::done_script("success.jsonl", 0));
    let jobs = names
        .iter()
        .map(|n| env.add_with(&["--account", n], &format!("On {n}")))
        .collect();
    (env, gates, jobs)
}

#[test]
fn ticks_started_together_probe_their_accounts_side_by_side_not_one_behind_another() {
    let (env, gates, jobs) = three_gated_accounts();
    let ticks: Vec<std::process::Child> = (0..3).map(|_| env.spawn_tick()).collect();
    // Every probe is asked while the others are held: no tick waits on another's network.
    let waiting =
        |g: &std::path::PathBuf| std::path::PathBuf::from(format!("{}.waiting", g.display()));
    crate::support::wait_until("the probes did not run side by side", || {
        gates.iter().all(|g| waiting(g).exists())
    });
    for gate in &gates {
        std::fs::write(gate, "").unwrap();
    }
    let actions = crate::support::actions(ticks);
    assert_eq!(actions, ["ran", "ran", "ran"]);
    let mut accounts: Vec<String> = jobs
        .iter()
        .map(|id| {
            let shown = env.show(id);
            assert_eq!(shown["state"], "done", "{shown}");
            shown["runs"][0]["account"].as_str().unwrap().to_string()
        })
        .collect();
    accounts.sort();
    assert_eq!(accounts, ["a", "b", "c"]);
}

/// The number an SVG element's attribute `key` holds on its line of the page.
fn attr(line: &str, key: &str) -> f64 {
    let value = line.split(&format!(" {key}=\"")).nth(1).unwrap();
    value.split('"').next().unwrap().parse().unwrap()
}

/// A night of `runs` Runs over named Jobs, each Run ending `continue` (every fourth done),
/// and its report page.
fn night_page(runs: usize) -> (TestEnv, String) {
    let env = TestEnv::with_config("    limits: {fiveHourMax: 60, weeklyMax: 50}\n");
    env.five_hour(&[20.0], "2026-11-30T05:00:00.000Z");
    let names = ["parser", "callers", "docs", "tests"];
    for name in names {
        env.add_with(
            &["--name", name, "--max-runs", "100"],
            &format!("Work on the {name}"),
        );
    }
    for i in 0..runs {
        let status = if i % 15 == 14 { "done" } else { "continue" };
        env.script(&format!(
            "read-prompt\nwrite step-{i}.txt {i}\\n\nwrite .owl/handoff.md status: {status}\\n\\nStep {i}.\\n\ncommit step {i}\nreplay success.jsonl\nwait-stdin-eof\nexit 0\n"
        ));
        env.tick();
    }
    let page = crate::report::html_report(&env, "12h");
    (env, page)
}

#[test]
fn the_report_page_puts_the_night_first_and_draws_what_it_says_where_it_can_be_read() {
    let (_env, page) = night_page(12);
    // The chart and the summary first, the Jobs after, each Job's Runs folded.
    let chart = page.find("<svg").unwrap();
    let jobs = page.find("<h2>Jobs</h2>").unwrap();
    assert!(chart < jobs);
    assert!(page.find("Runs on").unwrap() < chart);
    // The first Job's twelve Runs, folded; the three others never ran.
    assert_eq!(page.matches("<details><summary>").count(), 1, "{page}");
    assert!(page.contains("<summary>12 Runs</summary>"), "{page}");
    // A named Job is named once; changes in words.
    assert!(!page.contains("parser (parser)"), "{page}");
    assert!(
        !page.contains("commit(s)") && !page.contains("file(s)"),
        "{page}"
    );
    // The key above the chart, with each ceiling; no Window's name drawn in the plot.
    let svg = &page[chart..page.find("</svg>").unwrap()];
    assert!(
        !svg.contains(">five_hour<") && !svg.contains(">seven_day<"),
        "{svg}"
    );
    let legend = &page[page.find("class=\"legend\"").unwrap()..chart];
    assert!(legend.contains("five_hour, ceiling 60%"), "{legend}");
    assert!(svg.contains("class=\"ceiling-label\""), "{svg}");
    // Runs seconds apart are bars apart: none overlaps the next.
    let bars: Vec<(f64, f64)> = svg
        .lines()
        .filter(|l| l.contains("<rect class=\"run"))
        .map(|l| (attr(l, "x"), attr(l, "width")))
        .collect();
    assert_eq!(bars.len(), 12);
    for pair in bars.windows(2) {
        assert!(pair[0].0 + pair[0].1 < pair[1].0, "{pair:?} overlap");
    }
}

#[test]
fn the_no_utilization_note_is_drawn_clear_of_the_ceiling_lines() {
    let env = TestEnv::with_config("    limits: {fiveHourMax: 60, weeklyMax: 50}\n");
    env.add("Nothing observed");
    let page = crate::report::html_report(&env, "12h");
    let note = page
        .lines()
        .find(|l| l.contains("no utilization observed"))
        .unwrap();
    let y = attr(note, "y");
    for line in page.lines().filter(|l| l.contains("class=\"ceiling\"")) {
        let at = attr(line, "y1");
        assert!(
            (at - y).abs() > 14.0,
            "the note at {y} is drawn over a ceiling at {at}"
        );
    }
}

#[test]
#[ignore = "needs a real Chromium"]
fn e2e_a_night_of_sixty_runs_renders_chart_first_in_a_real_browser() {
    let (env, page) = night_page(60);
    let file = env.dir.path().join("night.html");
    std::fs::write(&file, &page).unwrap();
    let shot = std::env::var_os("OWL_KEEP_SCREENSHOT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env.dir.path().join("night.png"));
    let chromium = std::env::var_os("OWL_E2E_CHROMIUM").expect("OWL_E2E_CHROMIUM");
    let out = std::process::Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .arg("--window-size=1000,900")
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", file.display()))
        .output()
        .unwrap();
    assert!(shot.is_file(), "{}", String::from_utf8_lossy(&out.stderr));
    // The first screenful holds the chart: its ceiling, a dashed red line across it.
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.line_size / info.width as usize;
    let widest_red = (0..info.height as usize)
        .map(|y| {
            (0..info.width as usize)
                .filter(|x| {
                    let i = y * info.line_size + x * channels;
                    buf[i].abs_diff(0xcf) < 40
                        && buf[i + 1].abs_diff(0x22) < 40
                        && buf[i + 2].abs_diff(0x2e) < 40
                })
                .count()
        })
        .max()
        .unwrap_or(0);
    assert!(
        widest_red > info.width as usize / 3,
        "the chart is not on the first screen (widest red row: {widest_red})"
    );
}
