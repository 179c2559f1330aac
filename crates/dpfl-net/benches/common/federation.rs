//! The federation start-up shared by dpfl-net's network benches (`round`, `shuffler`;
//! included with `#[path]`): a federation directory on loopback (dev PKI, a one-round
//! experiment whose plan only fixes the model dimension), and a run of bare halves in one
//! process: server, optional shuffler, silos, each a tokio task on real TLS sockets.

use std::path::{Path, PathBuf};

use dpfl::algo::{ServerHalf, SiloHalf};
use dpfl_net::Federation;
use dpfl_net::server::ServerOutcome;

/// Writes `federation.toml` (and its experiment and certificates) for `silos` silos into
/// `dir`. The experiment's `features` fix the plan's model dimension, which bounds what the
/// shuffler accepts per reply (`codec::max_reply_messages`). Deadlines are long: a bench
/// round must never close on time.
pub(crate) fn federation_dir(dir: &Path, silos: usize, features: usize, shuffler: bool) -> PathBuf {
    std::fs::write(
        dir.join("experiment.toml"),
        format!(
            "name = \"bench\"\nrounds = 1\n[data]\nsource = {{ kind = \"synthetic\", task = \
             \"regression\", silos = 2, train = 4, test = 2, features = {features} }}\n[model]\n\
             kind = \"linear\"\n[[algorithms]]\nkind = \"mb-sgd\"\nstep_size = 0.1\n\
             batch_size = 1\n"
        ),
    )
    .expect("experiment file");
    dpfl_net::certs::dev_pki(&dir.join("certs"), silos).expect("dev PKI");
    let records = vec![1; silos];
    let shuffler = if shuffler {
        "[shuffler]\naddress = \"127.0.0.1:0\"\naddress_file = \"shuffler.addr\"\n"
    } else {
        ""
    };
    let text = format!(
        "experiment = \"experiment.toml\"\nseed = 1\n[public]\nrecords = {records:?}\n\
         features = {features}\nlipschitz = 1.0\n[server]\naddress = \"127.0.0.1:0\"\n\
         address_file = \"server.addr\"\nstate_dir = \"server\"\nround_deadline_ms = 600000\n\
         start_timeout_ms = 600000\nheartbeat_timeout_ms = 600000\n{shuffler}[tls]\n\
         dir = \"certs\"\n"
    );
    let p = dir.join("federation.toml");
    std::fs::write(&p, text).expect("federation file");
    p
}

/// The federation of `config` as the `dpfl` binary plans it.
pub(crate) fn load(config: &Path) -> Federation {
    // The runtime's own log, to stderr, at the level `RUST_LOG` asks (errors only without).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .try_init();
    let planner = |e: &Path, a: usize, p: &dpfl_net::config::PublicFacts| {
        dpfl_lab::experiment::plan_from_file(e, a, p.features, p.classes, &p.records, p.lipschitz)
    };
    Federation::load_with(config, Some(&planner)).expect("federation")
}

/// Runs `rounds` rounds of the federation of `config` from empty state directories, with
/// `server` as the server half and `silo(i)` as silo i's half (dimension `dim`), plus the
/// shuffler process when the federation has one. Returns the server's outcome once every
/// task has ended.
pub(crate) fn run(
    rt: &tokio::runtime::Runtime,
    config: &Path,
    rounds: u64,
    server: Box<dyn ServerHalf>,
    silo: impl Fn(u32) -> Box<dyn SiloHalf>,
    dim: usize,
) -> ServerOutcome {
    let dir = config.parent().expect("federation directory");
    let mut fed = load(config);
    let silos = fed.silos();
    let _ = std::fs::remove_dir_all(dir.join("server"));
    for i in 0..silos {
        let _ = std::fs::remove_dir_all(dir.join(format!("silo-{i}")));
    }
    let _ = std::fs::remove_file(dir.join("server.addr"));
    let _ = std::fs::remove_file(dir.join("shuffler.addr"));
    // The halves are bare: only the round count of the plan matters here.
    fed.plan.setup.rounds = rounds as usize;
    rt.block_on(async {
        let s = dpfl_net::server::Server::bind(fed.clone())
            .await
            .expect("server");
        let handle = tokio::spawn(s.run_with(server));
        let shuffler = match fed.config.shuffler {
            Some(_) => {
                let sh = dpfl_net::shuffler::ShufflerProcess::bind(fed.clone())
                    .await
                    .expect("shuffler");
                Some(tokio::spawn(sh.run()))
            }
            None => None,
        };
        // A silo that fails leaves the server waiting for the (long) deadline: stop the
        // bench at once, saying which silo and why.
        let (failed_tx, mut failed) = tokio::sync::mpsc::unbounded_channel();
        let silos: Vec<_> = (0..silos as u32)
            .map(|i| {
                let s = dpfl_net::silo::Silo::with_half(
                    fed.clone(),
                    i,
                    dpfl_testkit::tiny_silo(1),
                    silo(i),
                    dim,
                    dpfl_net::silo::Start::Fresh,
                )
                .expect("silo");
                let failed_tx = failed_tx.clone();
                tokio::spawn(async move {
                    if let Err(e) = s.run().await {
                        let _ = failed_tx.send(format!("silo {i}: {e}"));
                    }
                })
            })
            .collect();
        drop(failed_tx);
        let out = tokio::select! {
            out = handle => out.expect("server task").expect("server run"),
            Some(e) = failed.recv() => panic!("{e}"),
        };
        for s in silos {
            s.await.expect("silo task");
        }
        if let Some(e) = failed.recv().await {
            panic!("{e}");
        }
        if let Some(sh) = shuffler {
            sh.await.expect("shuffler task").expect("shuffler run");
        }
        out
    })
}
