//! The reproduction families `dpfl reproduce` knows, one line each: an id resolves to one
//! [`Family`], whose [`Reproduction`] the caller drives through the one loop
//! ([`super::reproduction::run`]). A flag the family does not take is refused here, once,
//! naming the flag and the families that take it.

use super::lowy::LowyGrid;
use super::normfedavg::IDS as NORMFEDAVG_IDS;
use super::normfedavg_repro::NormFedAvgRepro;
use super::reproduction::{Flag, Options, Reproduction};
use super::shuffle_rates_repro::ShuffleRates;
use super::soteria_repro::SoteriaRepro;

/// One reproduction, by family.
pub enum Family {
    /// Lowy & Razaviyayn's grids (`lowy-*`, and any `--spec` file).
    Lowy(LowyGrid),
    /// SoteriaFL's experiments (`soteria-a9a`, `soteria-mnist`).
    Soteria(SoteriaRepro<'static>),
    /// DP-NormFedAvg's tables (`normfedavg-fmnist-*`).
    NormFedAvg(NormFedAvgRepro),
    /// Cheu et al.'s implied experiment (`shuffle-rates`).
    ShuffleRates(ShuffleRates),
}

/// The families' id patterns and the flags each takes, for the refusal's wording.
fn families() -> [(&'static str, &'static [Flag]); 4] {
    [
        ("lowy-*", LowyGrid::TAKES),
        ("soteria-*", SoteriaRepro::TAKES),
        ("normfedavg-*", NormFedAvgRepro::TAKES),
        ("shuffle-rates", ShuffleRates::TAKES),
    ]
}

/// The families that take `flag`, e.g. "soteria-*".
fn takers(flag: Flag) -> String {
    families()
        .into_iter()
        .filter(|(_, takes)| takes.contains(&flag))
        .map(|(name, _)| name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reproduction `id` with `opts`: a flag its family does not take is refused (naming it),
/// then the family checks the values.
pub fn resolve(id: &str, opts: &Options) -> dpfl::Result<Family> {
    if NORMFEDAVG_IDS.contains(&id) {
        opts.refuse_others(id, NormFedAvgRepro::TAKES, &takers)?;
        Ok(Family::NormFedAvg(NormFedAvgRepro::new(id, opts)?))
    } else if id.starts_with("soteria-") {
        opts.refuse_others(id, SoteriaRepro::TAKES, &takers)?;
        Ok(Family::Soteria(SoteriaRepro::new(id, opts)?))
    } else if id == "shuffle-rates" {
        opts.refuse_others(id, ShuffleRates::TAKES, &takers)?;
        Ok(Family::ShuffleRates(ShuffleRates::new(opts)?))
    } else {
        opts.refuse_others(id, LowyGrid::TAKES, &takers)?;
        Ok(Family::Lowy(LowyGrid::new(id, opts)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(id: &str, opts: Options) -> String {
        match resolve(id, &opts) {
            Ok(_) => panic!("{id}: accepted"),
            Err(e) => e.to_string(),
        }
    }

    /// A flag a family does not take is refused by name, with the families that take it; a
    /// value is checked by the family; each id lands in its family.
    #[test]
    fn flags_are_refused_in_one_place_and_ids_find_their_family() {
        let e = refused(
            "lowy-obesity",
            Options {
                momentum: Some(0.5),
                ..Options::default()
            },
        );
        assert!(
            e.contains("--momentum")
                && e.contains("lowy-obesity does not take it (only normfedavg-* do)"),
            "{e}"
        );
        let e = refused(
            "shuffle-rates",
            Options {
                rewrite: true,
                ..Options::default()
            },
        );
        assert!(
            e.contains("--rewrite") && e.contains("only lowy-*, soteria-*, normfedavg-* do"),
            "{e}"
        );
        let e = refused(
            "normfedavg-fmnist-bits",
            Options {
                spec: Some("x.toml".into()),
                ..Options::default()
            },
        );
        assert!(e.contains("--spec") && e.contains("only lowy-* do"), "{e}");
        let e = refused(
            "soteria-a9a",
            Options {
                trials: Some(0),
                ..Options::default()
            },
        );
        assert!(e.contains("--trials") && e.contains("at least 1"), "{e}");
        let e = refused(
            "normfedavg-fmnist-fedavg",
            Options {
                momentum: Some(1.0),
                ..Options::default()
            },
        );
        assert!(e.contains("--momentum") && e.contains("[0, 1)"), "{e}");
        let e = refused("lowy-nope", Options::default());
        assert!(e.contains("lowy-nope") && e.contains("lowy-mnist"), "{e}");
        let quick = Options {
            quick: true,
            ..Options::default()
        };
        let ids = [
            ("lowy-obesity", "lowy-obesity-quick"),
            ("soteria-a9a", "soteria-a9a-quick"),
            ("normfedavg-fmnist-bits", "normfedavg-fmnist-bits-quick"),
            ("shuffle-rates", "shuffle-rates-quick"),
        ];
        for (i, (id, out)) in ids.into_iter().enumerate() {
            let (family, name) = match resolve(id, &quick).unwrap() {
                Family::Lowy(r) => (0, r.out_name()),
                Family::Soteria(r) => (1, r.out_name()),
                Family::NormFedAvg(r) => (2, r.out_name()),
                Family::ShuffleRates(r) => (3, r.out_name()),
            };
            assert_eq!((family, name.as_str()), (i, out));
        }
    }
}
