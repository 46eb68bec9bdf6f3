//! `owl report` over a night recorded with the fake agent: one Job done, one stopped at a
//! ceiling and resumed after the reset, one blocked. Its text, JSON and HTML agree.

use serde_json::Value;

use crate::support::{done_script, TestEnv};

/// Records the night; returns the env (its clock at 05:10) and the three Jobs' ids.
pub fn night() -> (TestEnv, [String; 3]) {
    let (env, ids, _) = night_with_ticks();
    (env, ids)
}

/// [`night`], with what each tick printed.
pub fn night_with_ticks() -> (TestEnv, [String; 3], Vec<Value>) {
    let mut ticks = Vec::new();
    let mut env = TestEnv::new();
    env.write_config(
        "usagePollInterval: 200ms\naccounts:\n  work:\n    limits:\n      fiveHourMax: 60\n",
    );
    // 03:00 — the first Job is done in one Run.
    env.five_hour(&[30.0], "2026-11-30T05:00:00.000Z");
    env.script(&done_script("success.jsonl", 0));
    let done = env.add_with(&["--priority", "3", "--name", "done-job"], "Done at once");
    ticks.push(env.tick());
    assert_eq!(ticks[0]["job_state"], "done");
    // 03:20 — the second climbs past the ceiling and is stopped; it waits for the reset.
    env.now = "2026-11-30T03:20:00Z".into();
    env.five_hour(&[40.0, 65.0], "2026-11-30T05:00:00.000Z");
    env.script("read-prompt\nreplay interrupt-control-request.jsonl 1 2\nsleep 30000\n");
    let climbed = env.add_with(&["--priority", "2"], "Climb");
    let tick = env.tick();
    assert_eq!(tick["outcome"], "interrupted", "{tick}");
    ticks.push(tick);
    // 03:40 — the third blocks on a question.
    env.now = "2026-11-30T03:40:00Z".into();
    env.five_hour(&[45.0], "2026-11-30T05:00:00.000Z");
    env.script("read-prompt\nwrite .owl/handoff.md status: blocked\\nneeds an API token\\n\ncommit handoff\nreplay success.jsonl\nwait-stdin-eof\n");
    let blocked = env.add_with(&["--priority", "1"], "Needs a token");
    // The climbed Job waits; the blocked one runs.
    let tick = env.tick();
    assert_eq!(tick["job_id"], blocked.as_str());
    ticks.push(tick);
    // 05:05 — after the reset the climbed Job runs again and is done.
    env.now = "2026-11-30T05:05:00Z".into();
    env.five_hour(&[5.0], "2026-11-30T10:00:00.000Z");
    env.script(&done_script("success.jsonl", 0));
    let tick = env.tick();
    assert_eq!(tick["job_id"], climbed.as_str(), "{tick}");
    assert_eq!(tick["job_state"], "done", "{tick}");
    ticks.push(tick);
    env.now = "2026-11-30T05:10:00Z".into();
    (env, [done, climbed, blocked], ticks)
}

#[test]
fn the_report_of_a_night_agrees_in_text_json_and_html() {
    let (env, [done, climbed, blocked]) = night();
    let json = env
        .owl()
        .args(["report", "--since", "3h", "--json"])
        .output()
        .unwrap();
    assert_eq!(json.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["since"], "2026-11-30T02:10:00Z");
    assert_eq!(report["until"], "2026-11-30T05:10:00Z");
    let jobs = report["jobs"].as_array().unwrap();
    let state = |id: &str| {
        jobs.iter()
            .find(|j| j["id"] == id)
            .map(|j| j["state"].as_str().unwrap().to_string())
    };
    assert_eq!(state(&done).as_deref(), Some("done"));
    assert_eq!(state(&climbed).as_deref(), Some("done"));
    assert_eq!(state(&blocked).as_deref(), Some("blocked"));
    let blocked_job = jobs.iter().find(|j| j["id"] == blocked.as_str()).unwrap();
    assert_eq!(blocked_job["next_step"], "needs an API token");
    let climbed_job = jobs.iter().find(|j| j["id"] == climbed.as_str()).unwrap();
    let runs = climbed_job["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["stop"], "ceiling");
    assert_eq!(runs[1]["outcome"], "succeeded");
    assert_eq!(
        report["summary"],
        "4 Runs on 3 Jobs; 2 done, 1 blocked, 0 failed; 0 Jobs wait to run"
    );
    let work = &report["accounts"][0];
    let five = work["windows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["window"] == "five_hour")
        .unwrap();
    assert_eq!(five["ceiling"], 60.0);
    let percents: Vec<f64> = five["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["percent"].as_f64().unwrap())
        .collect();
    assert!(
        percents.contains(&65.0) && percents.contains(&5.0),
        "{percents:?}"
    );
    assert_eq!(five["resets"][0], "2026-11-30T05:00:00Z");
    let windows = work["windows"].as_array().unwrap().len();
    let account_runs = work["runs"].as_array().unwrap().len();
    assert_eq!(account_runs, 4);

    // Text: the same Jobs and states, the chart rows, no colours when piped.
    let text = env
        .owl()
        .args(["report", "--since", "3h"])
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    for (id, state) in [(&done, "done"), (&climbed, "done"), (&blocked, "blocked")] {
        assert!(
            text.contains(&format!("Job {id}")) && text.contains(state),
            "{text}"
        );
    }
    // A Job whose name is its id is named once.
    assert!(
        text.contains(&format!("Job {done}: done")) && !text.contains("(done-job)"),
        "{text}"
    );
    assert!(text.contains("next: needs an API token"), "{text}");
    assert!(text.contains("peak 65%, ceiling 60%"), "{text}");
    assert!(text.contains('!') && text.contains('✕'), "{text}");
    assert!(!text.contains('\x1b'), "no colours when piped");
    // On a terminal: the terminal's red over the ceiling, never its code as text; none
    // with NO_COLOR.
    let on_a_terminal =
        |no_color| crate::support::on_a_terminal(&env, "report --since 3h", no_color);
    let coloured = on_a_terminal(None);
    assert!(coloured.contains("\x1b[31m"), "{coloured:?}");
    assert!(!coloured.contains("\\x1b"), "{coloured:?}");
    let plain = on_a_terminal(Some("1"));
    assert!(
        !plain.contains('\x1b') && !plain.contains("\\x1b"),
        "{plain:?}"
    );
    assert!(plain.contains('!'), "{plain:?}");
    assert!(text.contains("4 Runs on 3 Jobs"), "{text}");

    // HTML: one page, one path per Window, the ceiling at 60%, a bar per Run.
    let html = html_report(&env, "3h");
    assert!(!html.contains("<script"), "no script");
    assert_eq!(
        html.matches("http").count(),
        html.matches("http://www.w3.org/2000/svg").count(),
        "nothing fetched: the only URL is the SVG namespace"
    );
    assert!(
        !html.contains("src=") && !html.contains("<link"),
        "nothing fetched"
    );
    assert_eq!(html.matches("<path class=\"window\"").count(), windows);
    assert!(
        html.contains("class=\"ceiling\" data-window=\"five_hour\" data-percent=\"60\"")
            && html.contains("y1=\"88.0\" y2=\"88.0\""),
        "the ceiling line at 60%"
    );
    assert_eq!(html.matches("<rect class=\"run").count(), account_runs);
    assert_eq!(html.matches("<rect class=\"run stopped\"").count(), 1);
    for id in [&done, &climbed, &blocked] {
        assert!(html.contains(id.as_str()));
    }
    assert!(html.contains("4 Runs on 3 Jobs"));
}

/// The headless Chromium CI installs (`OWL_E2E_CHROMIUM`).
fn chromium() -> std::path::PathBuf {
    match std::env::var_os("OWL_E2E_CHROMIUM").map(std::path::PathBuf::from) {
        Some(path) if path.is_file() => path,
        other => panic!(
            "OWL_E2E_CHROMIUM ({other:?}) names no file: install Chromium \
             (`apt install chromium-headless-shell`) and set OWL_E2E_CHROMIUM to it"
        ),
    }
}

#[test]
#[ignore = "needs a real Chromium"]
fn e2e_the_report_page_renders_its_chart_in_a_real_browser() {
    let (env, _) = night();
    // A legend of more than one line: a weekly ceiling, and the night's.
    let config = std::fs::read_to_string(&env.config)
        .unwrap()
        .replace(
            "      fiveHourMax: 60\n",
            "      fiveHourMax: 60\n      weeklyMax: 50\n      modelWeeklyMax: 40\n",
        )
        .replace("accounts:\n", "schedule:\n  morning: '07:00'\naccounts:\n");
    std::fs::write(&env.config, config).unwrap();
    let page_text = html_report(&env, "3h");
    assert!(page_text.contains("night ceiling"), "{page_text}");
    let page = env.dir.path().join("night.html");
    let shot = env.dir.path().join("night.png");
    let out = std::process::Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1000,1400",
        ])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        shot.is_file(),
        "no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.line_size / info.width as usize;
    let pixel = |x: usize, y: usize| {
        let i = y * info.line_size + x * channels;
        (buf[i], buf[i + 1], buf[i + 2])
    };
    let near = |(r, g, b): (u8, u8, u8), (r2, g2, b2): (u8, u8, u8)| {
        r.abs_diff(r2) < 40 && g.abs_diff(g2) < 40 && b.abs_diff(b2) < 40
    };
    // The page is not blank, and the chart is drawn: the five-hour line in its blue, and
    // the ceiling in its red as a horizontal dashed line (many red pixels on one row).
    let (w, h) = (info.width as usize, info.height as usize);
    let mut blue = 0;
    let mut red_rows = std::collections::BTreeMap::<usize, usize>::new();
    let mut not_white = 0;
    for y in 0..h {
        for x in 0..w {
            let p = pixel(x, y);
            if p != (255, 255, 255) {
                not_white += 1;
            }
            if near(p, (0x1f, 0x6f, 0xeb)) {
                blue += 1;
            }
            if near(p, (0xcf, 0x22, 0x2e)) {
                *red_rows.entry(y).or_default() += 1;
            }
        }
    }
    assert!(not_white > w * h / 100, "the page is blank");
    assert!(blue > 300, "no five-hour line drawn ({blue} blue pixels)");
    let widest_red = red_rows.values().copied().max().unwrap_or(0);
    assert!(
        widest_red > w / 3,
        "no ceiling line across the chart (widest red row: {widest_red} of {w} pixels)"
    );
    // The ceiling (60%) lies above the 5% the Window ended at: its row is above the blue
    // line's lowest point.
    let ceiling_row = red_rows
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(y, _)| *y)
        .unwrap();
    let lowest_blue = (0..h)
        .rev()
        .find(|y| (0..w).any(|x| near(pixel(x, *y), (0x1f, 0x6f, 0xeb))))
        .unwrap();
    assert!(ceiling_row < lowest_blue, "{ceiling_row} vs {lowest_blue}");
    // Nothing runs past the page's column (1000 px, centred): in a window wider than it,
    // every column right of it is white. The legend wraps within it.
    let wide = env.dir.path().join("wide.png");
    std::process::Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .arg("--window-size=1400,1400")
        .arg(format!("--screenshot={}", wide.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&wide).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.line_size / info.width as usize;
    let (w, h) = (info.width as usize, info.height as usize);
    let edge = (w + 1000) / 2 + 2;
    let past: Vec<(usize, usize)> = (0..h)
        .flat_map(|y| (edge..w).map(move |x| (x, y)))
        .filter(|(x, y)| {
            let i = y * info.line_size + x * channels;
            (buf[i], buf[i + 1], buf[i + 2]) != (255, 255, 255)
        })
        .take(5)
        .collect();
    assert!(
        past.is_empty(),
        "drawn past the page's column (x {edge}): {past:?}"
    );
}

#[test]
fn a_period_bounds_its_runs_on_both_ends() {
    let mut env = TestEnv::new();
    env.script(&crate::support::done_script("success.jsonl", 0));
    env.add("Runs at three");
    env.tick();
    let runs = |env: &TestEnv, since: &str| {
        let out = env
            .owl()
            .args(["report", "--json", "--since", since])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        report["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["runs"].as_array().map_or(0, Vec::len))
            .sum::<usize>()
    };
    assert_eq!(runs(&env, "1h"), 1);
    // A period that ends an hour before the Run: the Run is not in it.
    env.now = "2026-11-30T02:00:00Z".into();
    assert_eq!(runs(&env, "1h"), 0);
}

/// Issue 23: the report tells the night as it was: its waiting count is the Jobs it lists
/// as waiting, a Job that never ran is listed with why, and "next" says when there is none.
#[test]
fn the_report_counts_and_lists_every_job_that_waits() {
    let env = TestEnv::new();
    env.script("read-prompt\nreplay api-401-oauth.jsonl\nwait-stdin-eof\nexit 1\n");
    let ran = env.add("Runs into a lost login");
    env.tick();
    let never = env.add("Never runs");
    let out = env
        .owl()
        .args(["report", "--json", "--since", "1h"])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["summary"], "1 Run on 1 Job; 0 done, 0 blocked, 0 failed; 2 Jobs wait to run",
        "{report}"
    );
    let jobs = report["jobs"].as_array().unwrap();
    let listed: Vec<&str> = jobs.iter().map(|j| j["id"].as_str().unwrap()).collect();
    assert!(
        listed.contains(&ran.as_str()) && listed.contains(&never.as_str()),
        "{listed:?}"
    );
    let never_json = jobs.iter().find(|j| j["id"] == never.as_str()).unwrap();
    assert!(never_json["runs"].as_array().unwrap().is_empty());
    let why = never_json["reason"].as_str().unwrap_or_default();
    assert!(why.contains("not logged in"), "{why}");
    let text = env
        .owl()
        .args(["report", "--since", "1h"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("next: none (no Handoff yet)"), "{text}");
    assert!(
        text.contains(&format!("Job {never}: queued — waits for")),
        "{text}"
    );
}

/// Issue 23: with no figure observed, the page still draws each configured ceiling and
/// says that no utilization was observed; a Run of seconds is a bar one can see.
#[test]
fn the_report_page_draws_configured_ceilings_and_short_runs() {
    let env = TestEnv::with_config("");
    env.write_config(&format!(
        "accounts:\n  work:\n    credentialStore: {}\n    limits: {{fiveHourMax: 60, weeklyMax: 50}}\n",
        env.dir.path().join("creds").display()
    ));
    let html = html_report(&env, "12h");
    assert!(
        html.contains(r#"class="ceiling" data-window="five_hour" data-percent="60""#),
        "{html}"
    );
    assert!(
        html.contains(r#"class="ceiling" data-window="seven_day" data-percent="50""#),
        "{html}"
    );
    assert!(
        html.contains("no utilization observed in this period"),
        "{html}"
    );
    let text = env
        .owl()
        .args(["report", "--since", "12h"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains("no utilization observed"));

    // One Run of no time at all: a bar of at least 8 of the chart's 960 units.
    env.five_hour(&[20.0], "2026-11-30T05:00:00.000Z");
    env.script(&crate::support::done_script("success.jsonl", 0));
    env.add("Quick");
    env.tick();
    let html = html_report(&env, "12h");
    let bar = html
        .lines()
        .find(|l| l.contains(r#"class="run""#))
        .unwrap_or_else(|| panic!("no Run bar: {html}"));
    let width: f64 = bar
        .split("width=\"")
        .nth(1)
        .and_then(|w| w.split('"').next())
        .and_then(|w| w.parse().ok())
        .unwrap();
    assert!(width >= 8.0, "{bar}");
}

/// Writes the report of the last `since` to `night.html` in the test dir, as a person
/// would, and returns the page.
pub fn html_report(env: &TestEnv, since: &str) -> String {
    let page = env.dir.path().join("night.html");
    env.owl()
        .args(["report", "--since", since, "--html"])
        .arg(&page)
        .assert()
        .success();
    std::fs::read_to_string(&page).unwrap()
}

#[test]
fn the_report_page_draws_each_line_where_and_when_it_holds() {
    let env = TestEnv::new();
    env.write_config(
        "usagePollInterval: 200ms\nschedule:\n  morning: '07:00'\n  dayEnds: '23:00'\n\
         accounts:\n  work:\n    limits:\n      fiveHourMax: 50\n",
    );
    env.five_hour(&[20.0], "2026-11-30T05:00:00.000Z");
    // A Run a person cancels.
    env.script(&crate::support::held_run_script(&env.release_file(), ""));
    let job = env.add("Cancelled by its person");
    let tick = env.spawn_tick();
    env.wait_running();
    env.owl().args(["cancel", &job]).assert().success();
    let _ = tick.wait_with_output().unwrap();
    // 15:00 to 03:00: the night from 23:00 on, and no morning yet.
    let page = html_report(&env, "12h");
    let night = page
        .lines()
        .find(|l| l.starts_with("<line class=\"night\""))
        .unwrap_or_else(|| panic!("no night line: {page}"));
    let x1: f64 = attr(night, "x1");
    // 23:00 is 8 of the period's 12 hours in: the plot runs from 64 to 944.
    assert!((x1 - (64.0 + 880.0 * 8.0 / 12.0)).abs() < 1.0, "{night}");
    assert!(
        !page.contains("the morning</span>"),
        "no morning is drawn, none is named"
    );
    assert!(page.contains("night ceiling 85% (dotted purple)"), "{page}");
    // The ceiling's label names its Window, inside the plot: never on the axis's figures.
    let label = page
        .lines()
        .find(|l| l.starts_with("<text class=\"ceiling-label\""))
        .unwrap();
    assert!(label.contains(">five_hour ceiling 50%<"), "{label}");
    assert!(attr::<f64>(label, "x") > 64.0, "{label}");
    // A person's cancel is drawn apart from a stop of owl's.
    assert!(page.contains("<rect class=\"run cancelled\""), "{page}");
    assert!(!page.contains("<rect class=\"run stopped\""), "{page}");
}

/// An attribute's value in one line of SVG.
fn attr<T: std::str::FromStr>(line: &str, name: &str) -> T {
    let value = line
        .split(&format!(" {name}=\""))
        .nth(1)
        .and_then(|v| v.split('"').next())
        .unwrap_or_else(|| panic!("no {name} in {line}"));
    value.parse().unwrap_or_else(|_| panic!("{name}={value}"))
}

#[test]
fn the_report_says_why_a_queued_job_waits_as_status_does() {
    let env = TestEnv::new();
    // A window that is closed at 03:00 (the test's clock): the Job is ready but waits.
    env.write_config("schedule:\n  window: '22:00-02:00'\naccounts:\n  work: {}\n");
    let job = env.add_with(&["--name", "later"], "Waits for the window");
    let status = env.status();
    let said = status["queue"][0]["reason"].as_str().unwrap().to_string();
    assert!(said.contains("outside the schedule window"), "{status}");
    let report = env
        .owl()
        .args(["report", "--since", "3h"])
        .output()
        .unwrap();
    let text = String::from_utf8(report.stdout).unwrap();
    assert!(
        text.contains(&format!("Job {job}: queued — {said}")),
        "{text}"
    );
    let json = env
        .owl()
        .args(["report", "--since", "3h", "--json"])
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["jobs"][0]["reason"], said.as_str(), "{json}");
}
