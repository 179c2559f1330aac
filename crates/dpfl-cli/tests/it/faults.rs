//! Network faults on 127.0.0.1 (issue 12, items 1-4 and 9; issue 11, item 5): damaged state,
//! duplicate processes, an absent server, a foreign CA, a wrong server name, a process pointed
//! at itself, a federation file that does not match the data, keys others can read, and a
//! plan over a silo's own budget. Each case asserts the exit code, that nothing panicked, that
//! the process ended in bounded time, that the error names the culprit, and (for state) that
//! nothing was released or charged again.

use crate::common;
use common::{free_port, prepare_only_args, silo_args, spawn, strs, wait_exit};

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const EXPERIMENT: &str = r#"
name = "faults"
rounds = 3
seed = 5
participation = { kind = "all" }
[data]
source = { kind = "synthetic", task = "binary", silos = 3, train = 60, test = 20, features = 4, shift = 0.3 }
[model]
kind = "logistic"
[privacy]
epsilon = 2.0
delta = "1/n^2"
lipschitz = 1.0
[[algorithms]]
label = "ISRL-DP MB-SGD"
kind = "mb-sgd"
calibration = "accountant"
step_size = 0.3
batch_size = 20
output = "last"
"#;

/// A prepared federation (trial 0, algorithm 0) of three silos.
struct Fed {
    /// The trial directory (holds federation-0.toml, data/, alg-0/).
    dir: PathBuf,
}

impl Fed {
    fn prepare(root: &Path) -> Fed {
        Fed::prepare_with(root, EXPERIMENT)
    }
    fn prepare_with(root: &Path, experiment: &str) -> Fed {
        std::fs::create_dir_all(root).unwrap();
        let exp = root.join("exp.toml");
        std::fs::write(&exp, experiment).unwrap();
        let out = root.join("run");
        let o = dpfl(&prepare_only_args(&exp, &out, &[]), Duration::from_secs(60));
        assert_eq!(o.code, Some(0), "{}", o.stderr);
        Fed {
            dir: out.join("trial-0"),
        }
    }
    fn cfg(&self) -> PathBuf {
        self.dir.join("federation-0.toml")
    }
    fn shard(&self, i: usize) -> PathBuf {
        self.dir.join(format!("data/silo-{i}.shard"))
    }
    fn budget(&self, i: usize) -> PathBuf {
        self.dir.join(format!("alg-0/budget-silo-{i}.toml"))
    }
    fn silo_state(&self, i: usize) -> PathBuf {
        self.dir.join(format!("alg-0/silo-{i}"))
    }
    fn server_state(&self) -> PathBuf {
        self.dir.join("alg-0/server")
    }
    /// Rewrites the federation file.
    fn edit(&self, f: impl FnOnce(String) -> String) {
        let text = std::fs::read_to_string(self.cfg()).unwrap();
        std::fs::write(self.cfg(), f(text)).unwrap();
    }
    /// A fixed server address on a port nothing listens on (no address file).
    fn closed_port(&self) -> u16 {
        let port = free_port();
        self.edit(|t| {
            t.replace(
                "address = \"127.0.0.1:0\"\naddress_file = \"alg-0/server.addr\"",
                &format!("address = \"127.0.0.1:{port}\""),
            )
        });
        port
    }
    fn silo_args(&self, i: usize, extra: &[&str]) -> Vec<String> {
        let mut v = silo_args(&self.cfg(), i, &self.shard(i));
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    }
    /// Runs the whole federation (server and three silos) to the end.
    fn run_to_end(&self, logs: &Path) {
        let cfg = self.cfg();
        let mut children = vec![spawn(
            &["server", "--config", cfg.to_str().unwrap()],
            &logs.join("server.log"),
        )];
        for i in 0..3 {
            let args = self.silo_args(i, &[]);
            children.push(spawn(&strs(&args), &logs.join(format!("silo-{i}.log"))));
        }
        for c in &mut children {
            let s = wait_exit(c, Duration::from_secs(120));
            assert!(s.success(), "{}", read_logs(logs));
        }
    }
}

struct Out {
    code: Option<i32>,
    stderr: String,
    took: Duration,
}

/// Runs `dpfl ARGS` to its end, failing the test if it takes longer than `limit` (a hang).
fn dpfl(args: &[&str], limit: Duration) -> Out {
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_dpfl"))
        .args(args)
        .env("DPFL_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run dpfl");
    // Read stderr on a thread so a chatty process cannot block on a full pipe.
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let status = wait_exit(&mut child, limit);
    let stderr = reader.join().unwrap();
    assert!(
        !stderr.contains("panicked"),
        "dpfl {args:?} panicked: {stderr}"
    );
    Out {
        code: status.code(),
        stderr,
        took: start.elapsed(),
    }
}

fn read_logs(dir: &Path) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "log") {
            out.push_str(&format!("--- {}\n", e.path().display()));
            out.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
        }
    }
    out
}

/// The rounds charged in a silo's round ledger (a cell: `ledger.0` / `ledger.1`).
fn charged(state: &Path) -> Vec<u64> {
    dpfl_net::ledger::charged_rounds(&state.join("ledger")).unwrap()
}

/// Both slot files of a cell, flipped in their last byte.
fn damage_cell(path: &Path) {
    for i in 0..2 {
        let p = PathBuf::from(format!("{}.{i}", path.display()));
        let mut b = std::fs::read(&p).unwrap();
        if let Some(last) = b.last_mut() {
            *last ^= 1;
        }
        std::fs::write(&p, b).unwrap();
    }
}

fn backup(dir: &Path) -> PathBuf {
    let to = dir.with_extension("backup");
    let _ = std::fs::remove_dir_all(&to);
    std::fs::create_dir_all(&to).unwrap();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
    to
}

fn restore(from: &Path, dir: &Path) {
    std::fs::remove_dir_all(dir).unwrap();
    std::fs::create_dir_all(dir).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
}

#[test]
fn damaged_state_stops_every_process_naming_the_file_and_nothing_is_released_again() {
    let tmp = tempfile::tempdir().unwrap();
    let fed = Fed::prepare(tmp.path());
    fed.run_to_end(tmp.path());
    let s0 = fed.silo_state(0);
    assert_eq!(charged(&s0), vec![0, 1, 2]);
    let keep = backup(&s0);
    fed.closed_port();
    let silo = fed.silo_args(0, &["--connect-timeout", "1"]);
    let quick = Duration::from_secs(30);

    // Intact state: the silo restores it and only fails to find a server.
    let o = dpfl(&strs(&silo), quick);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stderr.contains("restored silo state"), "{}", o.stderr);
    assert!(o.stderr.contains("connect timeout"), "{}", o.stderr);

    // Each damage: exit 1 before any connection, naming the file; the ledger is unchanged.
    type Damage = (&'static str, fn(&Path), &'static str);
    let cases: [Damage; 8] = [
        (
            "state cell, both slots",
            |d| damage_cell(&d.join("state")),
            "refusing to start from empty",
        ),
        (
            "round ledger, both slots",
            |d| damage_cell(&d.join("ledger")),
            "refusing to start from empty",
        ),
        (
            "state deleted, ledger kept",
            |d| {
                std::fs::remove_file(d.join("state.0")).unwrap();
                std::fs::remove_file(d.join("state.1")).unwrap();
            },
            "round ledger records 3 charged rounds",
        ),
        (
            "ledger deleted, state kept",
            |d| {
                std::fs::remove_file(d.join("ledger.0")).unwrap();
                std::fs::remove_file(d.join("ledger.1")).unwrap();
            },
            "no stored ledger",
        ),
        (
            "every ledger and state file emptied to 0 bytes",
            |d| {
                for f in ["ledger.0", "ledger.1", "state.0", "state.1"] {
                    std::fs::write(d.join(f), b"").unwrap();
                }
            },
            "ledger.0 empty (0 bytes)",
        ),
        (
            "every ledger and state file replaced by garbage",
            |d| {
                for f in ["ledger.0", "ledger.1", "state.0", "state.1"] {
                    std::fs::write(d.join(f), b"not a cell at all").unwrap();
                }
            },
            "without a cell header",
        ),
        (
            "ledger emptied to 0 bytes, state kept",
            |d| {
                std::fs::write(d.join("ledger.0"), b"").unwrap();
                std::fs::write(d.join("ledger.1"), b"").unwrap();
            },
            "no stored ledger",
        ),
        (
            "state cell, one torn slot: recovered (the other slot is good)",
            |d| {
                let p = d.join("state.0");
                let b = std::fs::read(&p).unwrap();
                std::fs::write(&p, &b[..b.len() / 2]).unwrap();
            },
            "recovered the previous value",
        ),
    ];
    for (what, damage, expect) in cases {
        restore(&keep, &s0);
        damage(&s0);
        let o = dpfl(&strs(&silo), quick);
        assert_eq!(o.code, Some(1), "{what}: {}", o.stderr);
        assert!(o.stderr.contains(expect), "{what}: {}", o.stderr);
        if expect.contains("recovered") {
            assert!(o.stderr.contains("state.0"), "{what}: {}", o.stderr);
            assert!(o.stderr.contains("connect timeout"), "{what}: {}", o.stderr);
        } else {
            assert!(
                o.stderr.contains("silo-0/"),
                "{what}: names the file: {}",
                o.stderr
            );
            assert!(
                !o.stderr.contains("connect timeout"),
                "{what}: stopped first"
            );
        }
    }
    // --fresh does not start over either: not on emptied files, not on a good state.
    for emptied in [true, false] {
        restore(&keep, &s0);
        if emptied {
            for f in ["ledger.0", "ledger.1", "state.0", "state.1"] {
                std::fs::write(s0.join(f), b"").unwrap();
            }
        }
        let mut fresh = silo.clone();
        fresh.push("--fresh".into());
        let o = dpfl(&strs(&fresh), quick);
        assert_eq!(o.code, Some(1), "{}", o.stderr);
        assert!(
            o.stderr.contains("--fresh needs an empty state directory")
                && o.stderr.contains("ledger.0, ledger.1, state.0, state.1"),
            "{}",
            o.stderr
        );
        assert!(!o.stderr.contains("connect timeout"), "{}", o.stderr);
    }
    restore(&keep, &s0);
    assert_eq!(charged(&s0), vec![0, 1, 2], "nothing charged again");

    // A damaged server checkpoint: the server stops naming it instead of restarting at 0.
    damage_cell(&fed.server_state().join("checkpoint"));
    let o = dpfl(&["server", "--config", fed.cfg().to_str().unwrap()], quick);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stderr.contains("checkpoint."), "{}", o.stderr);
    assert!(
        o.stderr.contains("refusing to start from empty"),
        "{}",
        o.stderr
    );

    // A shard with one flipped bit of a finite value: refused by its checksum.
    let shard = fed.shard(1);
    let mut b = std::fs::read(&shard).unwrap();
    let at = b.len() - 40;
    b[at] ^= 1;
    std::fs::write(&shard, b).unwrap();
    let o = dpfl(&strs(&fed.silo_args(1, &["--connect-timeout", "1"])), quick);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stderr.contains("silo-1.shard"), "{}", o.stderr);
    assert!(o.stderr.contains("checksum mismatch"), "{}", o.stderr);
}

#[test]
fn a_second_process_on_a_state_directory_refuses_to_start() {
    let tmp = tempfile::tempdir().unwrap();
    let fed = Fed::prepare(tmp.path());
    fed.closed_port();
    let quick = Duration::from_secs(30);
    // The first silo 0 waits for the (absent) server; a second one must not start.
    let first = fed.silo_args(0, &["--connect-timeout", "60"]);
    let mut a = spawn(&strs(&first), &tmp.path().join("first.log"));
    let lock = fed.silo_state(0).join("LOCK");
    let end = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&lock).is_ok_and(|t| t.contains("pid")) {
        assert!(
            Instant::now() < end,
            "the first silo never locked its state"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = dpfl(
        &strs(&fed.silo_args(0, &["--connect-timeout", "60"])),
        quick,
    );
    let _ = a.kill();
    let _ = a.wait();
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stderr.contains("silo-0/LOCK"), "{}", o.stderr);
    assert!(o.stderr.contains("another process holds"), "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!("pid {}", a.id())),
        "{}",
        o.stderr
    );
    // "Promptly, not a hang": generous, since the machine may be loaded (2 cores, parallel tests).
    assert!(o.took < Duration::from_secs(25), "{:?}", o.took);
    // The same for the server.
    fed.edit(|t| t.replace("start_timeout_ms = 120000", "start_timeout_ms = 60000"));
    let cfg = fed.cfg();
    let mut s = spawn(
        &["server", "--config", cfg.to_str().unwrap()],
        &tmp.path().join("server.log"),
    );
    let lock = fed.server_state().join("LOCK");
    let end = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&lock).is_ok_and(|t| t.contains("pid")) {
        assert!(
            Instant::now() < end,
            "the first server never locked its state"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = dpfl(&["server", "--config", cfg.to_str().unwrap()], quick);
    let _ = s.kill();
    let _ = s.wait();
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stderr.contains("server/LOCK"), "{}", o.stderr);
}

#[test]
fn an_absent_server_a_foreign_ca_and_a_wrong_name_end_in_a_timeout_naming_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let fed = Fed::prepare(tmp.path());
    let port = fed.closed_port();
    let quick = Duration::from_secs(30);
    let silo = fed.silo_args(0, &["--connect-timeout", "1.5"]);
    // Absent server: refused connections, logged at info with the reason, then a timeout.
    let o = dpfl(&strs(&silo), quick);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!("127.0.0.1:{port}")),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("connection refused"), "{}", o.stderr);
    assert!(
        o.stderr.contains("retrying in"),
        "visible retries: {}",
        o.stderr
    );
    assert!(
        o.stderr.contains("connect timeout of 1.5 s"),
        "{}",
        o.stderr
    );
    assert!(o.took < Duration::from_secs(25), "{:?}", o.took);

    // A live server; silo 0 trusts another CA (its own ca.pem and certificate from it).
    fed.edit(|t| t.replace("start_timeout_ms = 120000", "start_timeout_ms = 60000"));
    let cfg = fed.cfg();
    let mut server = spawn(
        &["server", "--config", cfg.to_str().unwrap()],
        &tmp.path().join("server.log"),
    );
    let foreign = tmp.path().join("foreign");
    dpfl_net::certs::init_ca(&foreign, false).unwrap();
    dpfl_net::certs::issue(&foreign, &foreign, "silo-0", &[], false).unwrap();
    let text = std::fs::read_to_string(&cfg).unwrap();
    let foreign_cfg = fed.dir.join("federation-foreign.toml");
    std::fs::write(
        &foreign_cfg,
        text.replace(
            "dir = \"../certs\"",
            &format!("dir = {:?}", foreign.display().to_string()),
        ),
    )
    .unwrap();
    let mut args = fed.silo_args(0, &["--connect-timeout", "3"]);
    args[2] = foreign_cfg.to_str().unwrap().to_string();
    let o = dpfl(&strs(&args), quick);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stderr.contains("TLS rejected"), "{}", o.stderr);
    assert!(o.stderr.contains("connect timeout"), "{}", o.stderr);

    // The right CA, the wrong server name.
    let wrong_cfg = fed.dir.join("federation-name.toml");
    std::fs::write(
        &wrong_cfg,
        text.replace(
            "server_name = \"localhost\"",
            "server_name = \"wrong.example\"",
        ),
    )
    .unwrap();
    let mut args = fed.silo_args(1, &["--connect-timeout", "3"]);
    args[2] = wrong_cfg.to_str().unwrap().to_string();
    let o = dpfl(&strs(&args), quick);
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stderr.contains("name mismatch"), "{}", o.stderr);
    assert!(o.stderr.contains("wrong.example"), "{}", o.stderr);
}

#[test]
fn a_server_without_enough_silos_exits_non_zero_instead_of_finishing() {
    let tmp = tempfile::tempdir().unwrap();
    let fed = Fed::prepare(tmp.path());
    fed.edit(|t| t.replace("start_timeout_ms = 120000", "start_timeout_ms = 1000"));
    let o = dpfl(
        &["server", "--config", fed.cfg().to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stderr.contains("only 0 of 3 silos"), "{}", o.stderr);
    assert!(o.stderr.contains("min_silos = 3"), "{}", o.stderr);
    assert!(!fed.server_state().join("model.bin").exists());
    // An explicit min_silos beyond the federation is a config error.
    fed.edit(|t| t.replace("round_deadline_ms", "min_silos = 4\nround_deadline_ms"));
    let o = dpfl(
        &["server", "--config", fed.cfg().to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(o.stderr.contains("server.min_silos"), "{}", o.stderr);
}

#[test]
fn public_facts_that_do_not_match_the_data_are_refused_before_round_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let fed = Fed::prepare(tmp.path());
    let port = fed.closed_port();
    let good = std::fs::read_to_string(fed.cfg()).unwrap();
    assert!(good.contains("classes = 2\n"), "{good}");
    let quick = Duration::from_secs(30);
    let cases: [(&str, &str, i32, &str); 5] = [
        // (replace, with, exit code, named)
        ("classes = 2\n", "classes = 7\n", 2, "public.classes"),
        ("classes = 2\n", "", 2, "public.classes"),
        ("features = 4", "features = 5", 2, "public.features"),
        ("features = 4", "features = 0", 2, "public.features"),
        ("records = [", "records = [61, ", 2, "public.records[0]"),
    ];
    for (from, to, code, named) in cases {
        std::fs::write(fed.cfg(), good.replacen(from, to, 1)).unwrap();
        let o = dpfl(&strs(&fed.silo_args(0, &["--connect-timeout", "1"])), quick);
        assert_eq!(o.code, Some(code), "{from:?} -> {to:?}: {}", o.stderr);
        assert!(o.stderr.contains(named), "{from:?} -> {to:?}: {}", o.stderr);
        assert!(
            !o.stderr.contains("connect timeout"),
            "refused before connecting"
        );
    }
    // A shuffler whose address is the server's would talk to itself.
    std::fs::write(
        fed.cfg(),
        good.replace(
            "[tls]",
            &format!("[shuffler]\naddress = \"127.0.0.1:{port}\"\n\n[tls]"),
        ),
    )
    .unwrap();
    let o = dpfl(
        &["shuffler", "--config", fed.cfg().to_str().unwrap()],
        quick,
    );
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(o.stderr.contains("shuffler.address"), "{}", o.stderr);
    assert!(o.stderr.contains("talk to itself"), "{}", o.stderr);
}

#[test]
fn a_silo_keeps_its_own_budget_and_refuses_a_plan_that_spends_more() {
    let tmp = tempfile::tempdir().unwrap();
    let fed = Fed::prepare(tmp.path());
    fed.closed_port();
    let quick = Duration::from_secs(30);
    // The federation file's experiment targets ε = 2; this silo allows itself ε = 0.5.
    std::fs::write(
        fed.budget(0),
        "epsilon = 0.5\ndelta = 1e-4\nneighbouring = \"replace-one\"\n",
    )
    .unwrap();
    // The data path does not exist: the plan is refused before any data is read.
    let mut args = fed.silo_args(0, &["--connect-timeout", "1"]);
    args[6] = tmp
        .path()
        .join("no-such.shard")
        .to_str()
        .unwrap()
        .to_string();
    let o = dpfl(&strs(&args), quick);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stderr.contains("own budget ε = 0.5"), "{}", o.stderr);
    assert!(o.stderr.contains("before reading any data"), "{}", o.stderr);
    assert!(!o.stderr.contains("no-such.shard"), "{}", o.stderr);
    assert!(!fed.silo_state(0).exists(), "no state was created");
    // A budget that covers the plan: accepted (then the absent server times out).
    std::fs::write(fed.budget(0), "epsilon = 50.0\ndelta = 1e-4\n").unwrap();
    let o = dpfl(&strs(&fed.silo_args(0, &["--connect-timeout", "1"])), quick);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stderr.contains("plan accepted"), "{}", o.stderr);
    // Enforcement off is said out loud.
    std::fs::write(fed.budget(0), "enforce = false\n").unwrap();
    let o = dpfl(&strs(&fed.silo_args(0, &["--connect-timeout", "1"])), quick);
    assert!(o.stderr.contains("enforcement is OFF"), "{}", o.stderr);
    // A budget file missing δ while enforcing, and no budget file at all.
    std::fs::write(fed.budget(0), "epsilon = 1.0\n").unwrap();
    let o = dpfl(&strs(&fed.silo_args(0, &[])), quick);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(o.stderr.contains("budget-silo-0.toml"), "{}", o.stderr);
    let mut args = fed.silo_args(0, &[]);
    args.truncate(7);
    let o = dpfl(&strs(&args), quick);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(o.stderr.contains("--budget"), "{}", o.stderr);
}

/// A federation whose plan is refused (pan-private AC-SA's Gaussian needs ε < 1) after the
/// PKI and the shards are written leaves none of them behind: not in a directory it made, and
/// in a directory given with `--force` only what was there before.
#[test]
fn a_refused_federation_leaves_no_keys_or_shards_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp.toml");
    let refused = EXPERIMENT
        .split("[[algorithms]]")
        .next()
        .unwrap()
        .to_string()
        + "[[algorithms]]\nkind = \"pan-private-acsa\"\nsmoothness = 0.25\nbatch_size = 10\ndiameter = 10.0\n";
    std::fs::write(&exp, refused).unwrap();
    let federate = |out: &Path, extra: &[&str]| {
        dpfl(
            &prepare_only_args(&exp, out, extra),
            Duration::from_secs(60),
        )
    };
    let out = tmp.path().join("run");
    let o = federate(&out, &[]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(o.stderr.contains("privacy.epsilon"), "{}", o.stderr);
    assert!(!out.exists(), "the refused run left {}", out.display());
    // An existing directory, reused with --force: its own file stays, nothing new remains.
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let o = federate(&out, &["--force"]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    let left: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, ["notes.txt"]);
    // An accepted plan (the file's MB-SGD) keeps its keys and shards.
    let fed = Fed::prepare(&tmp.path().join("ok"));
    assert!(fed.cfg().exists());
    assert!(tmp.path().join("ok/run/certs/ca.key").exists());
    assert!(tmp.path().join("ok/run/trial-0/data/silo-0.shard").exists());
}

#[cfg(unix)]
#[test]
fn private_keys_are_owner_only_and_the_ca_key_must_match_its_certificate() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let ca = tmp.path().join("ca");
    let quick = Duration::from_secs(30);
    let o = dpfl(&["certs", "init", "--dir", ca.to_str().unwrap()], quick);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&ca.join("ca.key")), 0o600);
    let issue = |name: &str| {
        dpfl(
            &[
                "certs",
                "issue",
                "--ca-dir",
                ca.to_str().unwrap(),
                "--name",
                name,
            ],
            quick,
        )
    };
    assert_eq!(issue("silo-0").code, Some(0));
    assert_eq!(mode(&ca.join("silo-0.key")), 0o600);
    // A group-readable CA key is refused, as ssh refuses a key "too open".
    std::fs::set_permissions(ca.join("ca.key"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = issue("silo-1");
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(
        o.stderr.contains("ca.key") && o.stderr.contains("0644"),
        "{}",
        o.stderr
    );
    std::fs::set_permissions(ca.join("ca.key"), std::fs::Permissions::from_mode(0o600)).unwrap();
    // A ca.key from another CA.
    let other = tmp.path().join("other");
    assert_eq!(
        dpfl(&["certs", "init", "--dir", other.to_str().unwrap()], quick).code,
        Some(0)
    );
    std::fs::copy(other.join("ca.key"), ca.join("ca.key")).unwrap();
    let o = issue("silo-2");
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stderr.contains("different CAs"), "{}", o.stderr);
    assert!(!ca.join("silo-2.pem").exists());

    // A silo whose TLS key others can read stops naming it; so does a server with an open
    // HPKE key.
    let fed = Fed::prepare(&tmp.path().join("fed"));
    fed.closed_port();
    let key = fed.dir.join("../certs/silo-0.key");
    assert_eq!(mode(&key), 0o600, "federate writes keys 0600");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let o = dpfl(&strs(&fed.silo_args(0, &["--connect-timeout", "5"])), quick);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stderr.contains("silo-0.key"), "{}", o.stderr);
    assert!(o.stderr.contains("chmod 600"), "{}", o.stderr);
    std::fs::create_dir_all(fed.server_state()).unwrap();
    let hpke = fed.server_state().join("hpke.key");
    std::fs::write(&hpke, [7u8; 64]).unwrap();
    std::fs::set_permissions(&hpke, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = dpfl(&["server", "--config", fed.cfg().to_str().unwrap()], quick);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stderr.contains("hpke.key"), "{}", o.stderr);
}

/// The stored state of a silo: (last round answered, the bodies stored for it).
fn stored(state: &Path) -> Option<(u64, Vec<Vec<u8>>)> {
    dpfl_net::silo::stored_answer(state)
        .unwrap()
        .map(|(r, bodies)| (u64::from(r), bodies))
}

#[test]
fn a_silo_killed_mid_round_again_and_again_loses_nothing_and_releases_nothing_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let fed = Fed::prepare_with(tmp.path(), &EXPERIMENT.replace("rounds = 3", "rounds = 40"));
    // Enforced: the silo's one ledger charges the budget and the release cap together.
    for i in 0..3 {
        std::fs::write(
            fed.budget(i),
            "epsilon = 50.0\ndelta = 1e-3\nneighbouring = \"replace-one\"\n",
        )
        .unwrap();
    }
    // Rounds of at least 60 ms: 40 rounds outlast the kill schedule below even when silos
    // start fast (a silo that finished all rounds before its first kill tests nothing).
    fed.edit(|t| {
        t.replace("round_deadline_ms = 30000", "round_deadline_ms = 5000")
            .replace("min_round_ms = 0", "min_round_ms = 60")
    });
    let cfg = fed.cfg();
    let logs = tmp.path();
    let mut server = spawn(
        &["server", "--config", cfg.to_str().unwrap()],
        &logs.join("server.log"),
    );
    let mut others: Vec<Child> = (1..3)
        .map(|i| {
            let a = fed.silo_args(i, &[]);
            spawn(&strs(&a), &logs.join(format!("silo-{i}.log")))
        })
        .collect();
    let s0 = fed.silo_state(0);
    // Built anew for every start: the first has --fresh, a restart resumes.
    let args0 = || fed.silo_args(0, &[]);
    // SIGKILL at times spread over a round's work (charge, compute, durable write, send).
    let delays_ms = [350u64, 120, 480, 60, 260, 180, 90, 400, 30, 220, 140, 310];
    let mut seen: std::collections::BTreeMap<u64, Vec<Vec<u8>>> = Default::default();
    let mut last_round = None;
    let (mut kills, mut checked_resends) = (0, 0);
    let mut finished = false;
    for (k, d) in delays_ms.iter().enumerate() {
        let mut silo0 = spawn(&strs(&args0()), &logs.join(format!("silo-0-run{k}.log")));
        std::thread::sleep(Duration::from_millis(*d));
        if let Some(s) = silo0.try_wait().unwrap() {
            // Only a finished federation ends a silo on its own.
            assert!(s.success(), "{}", read_logs(logs));
            finished = true;
            break;
        }
        silo0.kill().unwrap(); // SIGKILL: no destructor, no flush
        silo0.wait().unwrap();
        kills += 1;
        // What the killed process left: every round's stored message is the one stored the
        // first time (never re-noised), and rounds only move forward.
        if let Some((r, bytes)) = stored(&s0) {
            assert!(last_round <= Some(r), "stored round went back to {r}");
            last_round = Some(r);
            let first = seen.entry(r).or_insert_with(|| bytes.clone());
            assert_eq!(first, &bytes, "round {r} stored with different bytes");
            // Restarted in this process and asked for that round again: exactly the stored
            // bytes, and nothing charged.
            let before = charged(&s0);
            let f = dpfl_net::Federation::load(&cfg).unwrap();
            let data = dpfl_net::shard::read(&fed.shard(0)).unwrap();
            let local = dpfl_net::config::LocalBudget::load(&fed.budget(0)).unwrap();
            let mut silo = dpfl_net::silo::Silo::with_budget(
                f,
                0,
                data,
                &local,
                dpfl_net::silo::Start::Resume,
            )
            .unwrap();
            let again = silo.answer(&[], r as u32, None).unwrap();
            assert_eq!(again, Some((bytes, true)), "round {r} resent as stored");
            assert_eq!(silo.charged_rounds(), before);
            checked_resends += 1;
        }
        if server.try_wait().unwrap().is_some() {
            break;
        }
    }
    // The last run of silo 0 goes to the end of training (unless a run already did).
    let mut last = (!finished).then(|| spawn(&strs(&args0()), &logs.join("silo-0-last.log")));
    for c in others.iter_mut().chain(last.as_mut()).chain([&mut server]) {
        let s = wait_exit(c, Duration::from_secs(180));
        assert!(s.success(), "{}", read_logs(logs));
    }
    let log = read_logs(logs);
    assert!(!log.contains("panicked"), "{log}");
    assert!(kills >= 3, "killed {kills} times only: {log}");
    // Nothing lost: every restart restored what the last one stored, the server finished all
    // 40 rounds (its log says so) and the other silos answered every round.
    assert_eq!(charged(&fed.silo_state(1)), (0..40).collect::<Vec<u64>>());
    // Nothing released twice: each round charged once in the silo's one ledger.
    let rounds = charged(&s0);
    assert!(rounds.windows(2).all(|w| w[0] < w[1]), "{rounds:?}");
    // The ledger is charged before the state is stored, so a kill in between leaves one round
    // charged and never sent (spent, the safe direction); if the server then finished that
    // round without silo 0, nothing asks for it again. Never more than that one round.
    let (r, _) = stored(&s0).unwrap();
    let last = *rounds.last().unwrap();
    assert!(
        last == r || (last == r + 1 && !rounds.contains(&(r + 2))),
        "the last charged round {last} is the stored one {r} or the one after it"
    );
    eprintln!(
        "killed silo 0 {kills} times; {} stored rounds checked; silo 0 answered {} of 40 rounds",
        checked_resends,
        rounds.len()
    );
}

#[test]
fn exit_codes_follow_the_readme_table_in_every_subcommand() {
    let tmp = tempfile::tempdir().unwrap();
    let fed = Fed::prepare(tmp.path());
    fed.closed_port();
    let quick = Duration::from_secs(60);
    let missing = tmp.path().join("none.toml");
    let missing = missing.to_str().unwrap();
    let exp = tmp.path().join("exp.toml");
    let exp = exp.to_str().unwrap();
    let expect = |what: &str, args: &[&str], code: i32, named: &str| {
        let o = dpfl(args, quick);
        assert_eq!(o.code, Some(code), "{what}: {}", o.stderr);
        assert!(
            o.stderr.contains(named),
            "{what}: names {named}: {}",
            o.stderr
        );
        assert_eq!(
            o.stderr.matches("error:").count(),
            1,
            "{what}: {}",
            o.stderr
        );
    };
    // 2: a config file named on the command line that cannot be read, in every subcommand.
    expect("train", &["train", "--config", missing], 2, missing);
    expect(
        "federate",
        &["federate", "--local", "--config", missing],
        2,
        missing,
    );
    expect("server", &["server", "--config", missing], 2, missing);
    expect("shuffler", &["shuffler", "--config", missing], 2, missing);
    let mut silo = fed.silo_args(0, &[]);
    silo[2] = missing.to_string();
    expect("silo, federation file", &strs(&silo), 2, missing);
    let mut silo = fed.silo_args(0, &[]);
    silo[8] = missing.to_string();
    expect("silo, budget file", &strs(&silo), 2, missing);

    // 1: a malformed data file, whichever process reads it.
    let csv = tmp.path().join("bad.csv");
    std::fs::write(&csv, "a,b,y\n1,2,0\n3,x,1\n1,2,0\n3,4,1\n").unwrap();
    let csv_exp = tmp.path().join("csv.toml");
    std::fs::write(
        &csv_exp,
        EXPERIMENT.replace(
            "source = { kind = \"synthetic\", task = \"binary\", silos = 3, train = 60, test = 20, features = 4, shift = 0.3 }",
            "source = { kind = \"csv\", path = \"bad.csv\", spec = { target = { kind = \"class\", column = \"y\" } } }\npartition = { kind = \"iid\", silos = 2 }",
        ),
    )
    .unwrap();
    let csv_exp = csv_exp.to_str().unwrap();
    expect(
        "train, bad CSV",
        &["train", "--quiet", "--config", csv_exp],
        1,
        "bad.csv:3",
    );
    let out = tmp.path().join("fed-out");
    expect(
        "federate, bad CSV",
        &[
            "federate",
            "--local",
            "--config",
            csv_exp,
            "--out",
            out.to_str().unwrap(),
        ],
        1,
        "bad.csv:3",
    );
    let bad_shard = tmp.path().join("bad.shard");
    std::fs::write(&bad_shard, b"DPFLSHARD2\n{\"train_rows\":").unwrap();
    let mut silo = fed.silo_args(0, &["--connect-timeout", "1"]);
    silo[6] = bad_shard.to_str().unwrap().to_string();
    expect("silo, bad shard", &strs(&silo), 1, "bad.shard");

    // 1: a damaged reproduction checkpoint, named with its line.
    let ckpt = tmp.path().join("repro");
    std::fs::create_dir_all(&ckpt).unwrap();
    std::fs::write(ckpt.join("checkpoint.jsonl"), "garbage\n").unwrap();
    expect(
        "reproduce --resume, damaged checkpoint",
        &[
            "reproduce",
            "lowy-obesity",
            "--quick",
            "--resume",
            "--out",
            ckpt.to_str().unwrap(),
        ],
        1,
        "checkpoint.jsonl:1",
    );

    // 2: an unusable --out (a file), refused before any work in train, reproduce and
    // federate: federate makes no certificate, shard or process.
    std::fs::write(exp, EXPERIMENT).unwrap();
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let file = file.to_str().unwrap();
    expect(
        "train --out file",
        &["train", "--quiet", "--config", exp, "--out", file],
        2,
        file,
    );
    expect(
        "reproduce --out file",
        &["reproduce", "lowy-obesity", "--quick", "--out", file],
        2,
        file,
    );
    let o = dpfl(
        &["federate", "--local", "--config", exp, "--out", file],
        quick,
    );
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(o.stderr.contains(file), "{}", o.stderr);
    assert!(o.took < Duration::from_secs(25), "{:?}", o.took);
}
