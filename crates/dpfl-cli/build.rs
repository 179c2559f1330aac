//! Embeds the git revision of the build as `DPFL_GIT_REVISION` (provenance of every output,
//! `dpfl_lab::provenance`): `$DPFL_GIT_REVISION` if set (e.g. a container build without `.git`),
//! else `git rev-parse HEAD`, else "unknown".

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-env-changed=DPFL_GIT_REVISION");
    let rev = std::env::var("DPFL_GIT_REVISION")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| git(&["rev-parse", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=DPFL_GIT_REVISION={rev}");
    // Re-run when HEAD moves: HEAD itself (a branch switch), the branch's ref (a commit) and
    // packed-refs. Paths come from git, so worktrees work. Only files that exist are named:
    // cargo treats a missing one as always changed, which re-ran this script and relinked
    // the binary (and every test that runs it) on every build (issue 30). A branch whose ref
    // is only in packed-refs is followed through packed-refs.
    let watch = |p: String| {
        if std::path::Path::new(&p).exists() {
            println!("cargo:rerun-if-changed={p}");
        }
    };
    if let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) {
        watch(head);
    }
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(p) = git(&["rev-parse", "--git-path", &r])
    {
        watch(p);
    }
    if let Some(p) = git(&["rev-parse", "--git-path", "packed-refs"]) {
        watch(p);
    }
}
