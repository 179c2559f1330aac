//! Process helpers shared by the network test files (`net.rs`, `net_wings.rs`).

use std::process::Child;
use std::time::{Duration, Instant};

/// Polls `f` every 20 ms until it holds; fails the test after `limit`, naming `what`.
pub(crate) fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for `c` to exit; kills it and fails the test after `limit`.
pub(crate) fn wait_exit(c: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let end = Instant::now() + limit;
    loop {
        if let Some(s) = c.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > end {
            let _ = c.kill();
            panic!("process did not exit in time");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
