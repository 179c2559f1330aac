//! Process-wide memos of accountant results (issue 30: the privacy arithmetic must not be the
//! slow part of a run).
//!
//! Every accountant is a deterministic function of its inputs, and a run asks the same
//! questions many times: each of N silos of equal size calibrates and accounts the same event,
//! and a ledger recomposes its whole history, one leaf repeated t times, at every round. A memo
//! returns the value computed the first time, so an answer is bit for bit the one the
//! computation gives (nothing is approximated or shared between different inputs).
//!
//! Keys are the inputs' `Debug` text: f64 prints the shortest text that reads back to the
//! same bits, so two keys are equal exactly when the inputs are. A memo keeps at most `cap`
//! entries and starts again empty when full (the workloads above reuse a handful of keys).
//! Concurrent askers of one key wait for the first one's answer instead of computing it again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Bumped by [`forget_all`]: a memo that saw an older value starts again empty.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Empties every memo (before their next use), so that the next calls compute from scratch:
/// for benchmarks, which must time the computation and not a memo hit.
pub fn forget_all() {
    GENERATION.fetch_add(1, Ordering::SeqCst);
}

type Cell<V> = Arc<OnceLock<V>>;
/// The generation the map was filled in ([`forget_all`]), and the map.
type Map<V> = (u64, HashMap<String, Cell<V>>);

/// A bounded, thread-safe memo from a text key to a cloneable value.
pub(crate) struct Memo<V> {
    map: OnceLock<Mutex<Map<V>>>,
    cap: usize,
}

impl<V: Clone> Memo<V> {
    /// An empty memo of at most `cap` entries.
    pub(crate) const fn new(cap: usize) -> Self {
        Memo {
            map: OnceLock::new(),
            cap,
        }
    }

    /// The value stored under `key`, computed by `compute` (and stored) if there is none.
    pub(crate) fn get_or(&self, key: String, compute: impl FnOnce() -> V) -> V {
        self.get_or_keep(key, compute, |_| true)
    }

    /// [`Self::get_or`], keeping a newly computed value only if `keep` accepts it (e.g. not
    /// when it is too large to hold on to).
    pub(crate) fn get_or_keep(
        &self,
        key: String,
        compute: impl FnOnce() -> V,
        keep: impl FnOnce(&V) -> bool,
    ) -> V {
        let cell = {
            let mut g = self.lock();
            let map = &mut g.1;
            if map.len() >= self.cap && !map.contains_key(&key) {
                map.clear();
            }
            Arc::clone(map.entry(key.clone()).or_default())
        };
        let mut fresh = false;
        let v = cell
            .get_or_init(|| {
                fresh = true;
                compute()
            })
            .clone();
        if fresh && !keep(&v) {
            self.lock().1.remove(&key);
        }
        v
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Map<V>> {
        // A panic elsewhere while the map was locked leaves it consistent (every write is one
        // insert, remove or clear), so a poisoned lock is still usable.
        let mut g = self
            .map
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let now = GENERATION.load(Ordering::SeqCst);
        if g.0 != now {
            *g = (now, HashMap::new());
        }
        g
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn computes_once_per_key_and_restarts_when_full() {
        static M: Memo<u64> = Memo::new(2);
        let calls = AtomicUsize::new(0);
        let f = |v: u64| {
            calls.fetch_add(1, Ordering::SeqCst);
            v
        };
        assert_eq!(M.get_or("a".into(), || f(1)), 1);
        assert_eq!(M.get_or("a".into(), || f(99)), 1);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(M.get_or("b".into(), || f(2)), 2);
        // Full: a third key empties the memo, so "a" is computed again.
        assert_eq!(M.get_or("c".into(), || f(3)), 3);
        assert_eq!(M.get_or("a".into(), || f(4)), 4);
        assert_eq!(calls.load(Ordering::SeqCst), 4);
        // A value `keep` refuses is returned but not stored.
        static K: Memo<u64> = Memo::new(8);
        assert_eq!(K.get_or_keep("x".into(), || 7, |v| *v < 5), 7);
        assert_eq!(K.get_or_keep("x".into(), || 3, |v| *v < 5), 3);
        assert_eq!(K.get_or("x".into(), || 9), 3);
    }

    #[test]
    fn keys_tell_apart_every_f64() {
        // The key text is exact: neighbouring floats and the two zeros differ.
        let a = 0.1f64;
        let b = f64::from_bits(a.to_bits() + 1);
        assert_ne!(format!("{a:?}"), format!("{b:?}"));
        assert_ne!(format!("{:?}", 0.0f64), format!("{:?}", -0.0f64));
    }
}
