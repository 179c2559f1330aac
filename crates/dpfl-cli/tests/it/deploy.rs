//! The container recipe `deploy/Dockerfile`, checked without building it (this machine has no
//! container registry to pull the base image from; docs/deployment.md records what was built
//! with buildah): the crate and the workspace pieces it builds exist, the binary it installs is
//! this package's, its download is not piped into a shell, and the build context's ignore file
//! keeps the build outputs out. This is NOT a build.

use std::path::Path;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[test]
fn dockerfile_refers_to_what_the_repository_has() {
    let df = read("deploy/Dockerfile");
    // The package it builds and the binary it installs.
    assert!(
        df.contains("cargo build --release --locked -p dpfl-cli"),
        "{df}"
    );
    assert!(
        env!("CARGO_PKG_NAME") == "dpfl-cli" && env!("CARGO_BIN_EXE_dpfl").ends_with("dpfl"),
        "the binary is dpfl-cli's `dpfl`"
    );
    assert!(df.contains("install -m 0755 target/release/dpfl /usr/local/bin/dpfl"));
    assert!(df.contains("COPY --from=build /usr/local/bin/dpfl /usr/local/bin/dpfl"));
    assert!(df.contains("ENTRYPOINT [\"/usr/local/bin/dpfl\"]"));
    // --locked needs the lock file, and COPY . . the workspace at the context's root.
    for f in ["Cargo.lock", "Cargo.toml", "crates/dpfl-cli/Cargo.toml"] {
        assert!(root().join(f).is_file(), "{f}");
    }
    // Both stages start from the bare Debian image the docs name.
    assert_eq!(df.matches("FROM debian:trixie-slim").count(), 2, "{df}");
    // A failed download must fail its own step (`curl | sh` runs an empty script happily).
    assert!(
        !df.lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .any(|l| l.contains("| sh")),
        "rustup's script is piped into sh: {df}"
    );
    // The dpfl-net build compiles its .proto files in Rust (protox): no protoc in the image.
    let net = read("crates/dpfl-net/Cargo.toml");
    assert!(net.contains("protox"), "{net}");
    // The ignore file keeps build outputs and the git directory out of the context.
    let ignore = read("deploy/Dockerfile.dockerignore");
    for line in ["target", ".git"] {
        assert!(ignore.lines().any(|l| l.trim() == line), "{line}: {ignore}");
    }
    // The systemd unit starts the binary the image installs, with flags `dpfl silo` has.
    let unit = read("deploy/dpfl-silo@.service");
    assert!(
        unit.contains("ExecStart=/usr/local/bin/dpfl silo"),
        "{unit}"
    );
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_dpfl"))
        .args(["silo", "--help"])
        .output()
        .expect("dpfl silo --help");
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in ["--config", "--id", "--data", "--budget", "--metrics-addr"] {
        assert!(unit.contains(flag) && help.contains(flag), "{flag}");
    }
}
