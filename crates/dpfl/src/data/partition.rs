//! Partitioners: how one data set becomes N silos, and how each silo is split into train and
//! test. Every random choice draws from a [`DpRng`] (use a `Purpose::Data` stream) through
//! `dpfl_privacy::sampler`, so a partition is a deterministic function of the data and the
//! seed. Silo rows are kept in file order.
//!
//! * [`by_class`]: one silo per class (Lowy & Razaviyayn App. I.3, obesity, N = 7).
//! * [`by_sorted_target`]: sort by the target and cut into N groups, the first N−1 of
//!   ⌈n/N⌉ rows and the rest in the last (App. I.2, insurance).
//! * [`mnist_pairs`]: the 25 (even, odd) digit-pair silos with mixing fraction p (App. I.1,
//!   after Woodworth, Patel & Srebro 2020b). How the paper's sampling is read is documented on
//!   [`MnistPairs`].
//! * [`iid`]: a uniformly random split into N near-equal parts.
//! * [`dirichlet_label_skew`]: for each class, proportions q ~ Dir(α,…,α) over the N silos
//!   (Hsu, Qi & Brown 2019); small α gives strong label skew.
//! * [`train_test_split`]: per-silo random split, ⌈f·n⌉ test rows (scikit-learn's rounding:
//!   1548 rows at f = 0.2 give 1238 train / 310 test, the paper's n = 1238).
//! * [`balance_train`]: drop random training rows so every silo has the smallest silo's n
//!   (App. I.3: "discarded a small number of (randomly selected) training samples").

use dpfl_privacy::rng::DpRng;
use dpfl_privacy::sampler::{choose_subset, dirichlet, shuffle};
use serde::{Deserialize, Serialize};

use super::{Dataset, SiloData, Target};
use crate::{Error, Result};

/// A partition of a data set into silos, as written in an experiment spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum PartitionSpec {
    /// One silo per class.
    ByClass,
    /// Sorted by target into `silos` groups.
    SortedTarget {
        /// N, the number of silos.
        silos: usize,
    },
    /// The 25 MNIST digit-pair silos.
    MnistPairs {
        /// Mixing fraction in [0, 1]: the share of each silo's records drawn from the other digits.
        #[serde(default)]
        p: f64,
        /// Fraction of the rarest digit's count used per digit, in (0, 1] (default 1/7).
        #[serde(default = "default_scale")]
        scale: f64,
        /// Whether the digits' records are drawn with or without replacement.
        #[serde(default)]
        sampling: PairSampling,
    },
    /// Uniformly random near-equal parts.
    Iid {
        /// N, the number of silos.
        silos: usize,
    },
    /// Dirichlet(α) label skew; every silo gets at least `min_size` rows.
    Dirichlet {
        /// N, the number of silos.
        silos: usize,
        /// α > 0 of the Dirichlet; smaller is more skewed.
        alpha: f64,
        /// The fewest rows any silo may get (redrawn until met; default 1).
        #[serde(default = "default_min_size")]
        min_size: usize,
    },
    /// DP-NormFedAvg's label shards (`super::shards`): `silos` × `per_silo` shards.
    LabelShards {
        /// N, the number of silos.
        silos: usize,
        /// Shards per silo; the records are sorted by label before cutting, so a silo sees few
        /// labels.
        per_silo: usize,
    },
    /// One silo per distinct value of a CSV column (data already split, e.g. by hospital;
    /// see [`super::silos`]). Only for a `csv` source, which applies it while loading.
    ByColumn {
        /// The column whose values name the silos.
        column: String,
    },
}

fn default_scale() -> f64 {
    1.0 / 7.0
}
fn default_min_size() -> usize {
    1
}

impl PartitionSpec {
    /// Splits `data` into silos, drawing any randomness from `rng` (the run's data stream).
    pub fn apply(&self, data: &Dataset, rng: &mut DpRng) -> Result<Vec<Dataset>> {
        match *self {
            PartitionSpec::ByClass => by_class(data),
            PartitionSpec::SortedTarget { silos } => by_sorted_target(data, silos),
            PartitionSpec::MnistPairs { p, scale, sampling } => {
                mnist_pairs(data, &MnistPairs { p, scale, sampling }, rng)
            }
            PartitionSpec::Iid { silos } => iid(data, silos, rng),
            PartitionSpec::Dirichlet {
                silos,
                alpha,
                min_size,
            } => dirichlet_label_skew(data, silos, alpha, min_size, rng),
            PartitionSpec::LabelShards { silos, per_silo } => {
                super::shards::label_shards(data, silos, per_silo, rng)
            }
            PartitionSpec::ByColumn { .. } => Err(Error::config(
                "partition.kind",
                "by-column needs a csv source (the column is read from the file)",
            )),
        }
    }
}

fn check_silos(n_silos: usize, n: usize) -> Result<()> {
    if n_silos == 0 {
        return Err(Error::config("partition.silos", "must be at least 1"));
    }
    if n_silos > n {
        return Err(Error::config(
            "partition.silos",
            format!("{n_silos} silos for {n} rows would leave a silo empty"),
        ));
    }
    Ok(())
}

fn to_datasets(data: &Dataset, mut parts: Vec<Vec<usize>>) -> Vec<Dataset> {
    parts.iter_mut().for_each(|p| p.sort_unstable());
    parts.iter().map(|p| data.subset(p)).collect()
}

/// Row indices of each class, in class order.
pub fn by_class_indices(data: &Dataset) -> Result<Vec<Vec<usize>>> {
    let Target::Classes { names } = data.target() else {
        return Err(Error::config(
            "partition.kind",
            "by_class needs a class target, but the target is real",
        ));
    };
    let mut parts = vec![Vec::new(); names.len()];
    for (i, &v) in data.y().iter().enumerate() {
        parts[v as usize].push(i);
    }
    if let Some(c) = parts.iter().position(Vec::is_empty) {
        return Err(Error::data(
            "partition by class",
            format!(
                "class `{}` has no rows, so its silo would be empty",
                names[c]
            ),
        ));
    }
    Ok(parts)
}

/// One silo per class, silo c holding the rows of class c.
pub fn by_class(data: &Dataset) -> Result<Vec<Dataset>> {
    Ok(to_datasets(data, by_class_indices(data)?))
}

/// Row indices of the sorted-target groups: ascending y (ties by row), the first N−1 groups of
/// ⌈n/N⌉ rows, the rest in the last.
pub fn sorted_target_indices(y: &[f64], n_silos: usize) -> Result<Vec<Vec<usize>>> {
    let n = y.len();
    check_silos(n_silos, n)?;
    let size = n.div_ceil(n_silos);
    if size * (n_silos - 1) >= n {
        return Err(Error::config(
            "partition.silos",
            format!(
                "{n_silos} silos of ⌈{n}/{n_silos}⌉ = {size} rows leave the last silo empty; choose another N"
            ),
        ));
    }
    let mut order: Vec<usize> = (0..n).collect();
    // Stable sort: equal targets keep file order.
    order.sort_by(|&a, &b| y[a].total_cmp(&y[b]));
    Ok(order.chunks(size).map(<[usize]>::to_vec).collect())
}

/// Sort by target and cut into `n_silos` near-equal groups (Lowy & Razaviyayn App. I.2).
pub fn by_sorted_target(data: &Dataset, n_silos: usize) -> Result<Vec<Dataset>> {
    Ok(to_datasets(data, sorted_target_indices(data.y(), n_silos)?))
}

/// A uniformly random split of 0..n into `n_silos` parts whose sizes differ by at most one
/// (the first n mod N parts get the extra row).
pub fn iid_indices(n: usize, n_silos: usize, rng: &mut DpRng) -> Result<Vec<Vec<usize>>> {
    check_silos(n_silos, n)?;
    let mut perm: Vec<usize> = (0..n).collect();
    shuffle(rng, &mut perm);
    let (q, r) = (n / n_silos, n % n_silos);
    let mut parts = Vec::with_capacity(n_silos);
    let mut start = 0;
    for s in 0..n_silos {
        let len = q + usize::from(s < r);
        parts.push(perm[start..start + len].to_vec());
        start += len;
    }
    Ok(parts)
}

/// IID partition into `n_silos` near-equal silos.
pub fn iid(data: &Dataset, n_silos: usize, rng: &mut DpRng) -> Result<Vec<Dataset>> {
    Ok(to_datasets(data, iid_indices(data.len(), n_silos, rng)?))
}

/// Dirichlet label skew: for each class c (in order), its rows are shuffled and cut at the
/// cumulative proportions of q_c ~ Dir(α·1_N), rounded, so the counts of every class sum
/// exactly to its size. Draws are repeated (at most 1000 times) until every silo has at
/// least `min_size` rows.
pub fn dirichlet_indices(
    data: &Dataset,
    n_silos: usize,
    alpha: f64,
    min_size: usize,
    rng: &mut DpRng,
) -> Result<Vec<Vec<usize>>> {
    check_silos(n_silos, data.len())?;
    if !(alpha.is_finite() && alpha > 0.0) {
        return Err(Error::config(
            "partition.alpha",
            format!("must be finite and > 0, got {alpha}"),
        ));
    }
    if min_size.saturating_mul(n_silos) > data.len() {
        return Err(Error::config(
            "partition.min_size",
            format!(
                "{n_silos} silos of at least {min_size} rows need more than {} rows",
                data.len()
            ),
        ));
    }
    let classes = by_class_indices(data).or_else(|_| match data.target() {
        Target::Real => Err(Error::config(
            "partition.kind",
            "dirichlet needs a class target",
        )),
        // Empty classes are fine here: they contribute nothing.
        Target::Classes { names } => {
            let mut parts = vec![Vec::new(); names.len()];
            data.y()
                .iter()
                .enumerate()
                .for_each(|(i, &v)| parts[v as usize].push(i));
            Ok(parts)
        }
    })?;
    const ATTEMPTS: usize = 1000;
    for _ in 0..ATTEMPTS {
        let mut parts = vec![Vec::new(); n_silos];
        for class in &classes {
            let mut idx = class.clone();
            shuffle(rng, &mut idx);
            let q = dirichlet(rng, alpha, n_silos)?;
            let nc = idx.len();
            let mut cum = 0.0;
            let mut start = 0usize;
            for (s, part) in parts.iter_mut().enumerate() {
                cum += q[s];
                let end = if s + 1 == n_silos {
                    nc
                } else {
                    ((cum * nc as f64).round() as usize).clamp(start, nc)
                };
                part.extend_from_slice(&idx[start..end]);
                start = end;
            }
        }
        if parts.iter().all(|p| p.len() >= min_size) {
            return Ok(parts);
        }
    }
    Err(Error::data(
        "partition dirichlet",
        format!(
            "no draw in {ATTEMPTS} gave every one of {n_silos} silos at least {min_size} rows at alpha = {alpha}; \
             raise alpha or lower min_size"
        ),
    ))
}

/// Dirichlet(α) label-skewed partition.
pub fn dirichlet_label_skew(
    data: &Dataset,
    n_silos: usize,
    alpha: f64,
    min_size: usize,
    rng: &mut DpRng,
) -> Result<Vec<Dataset>> {
    Ok(to_datasets(
        data,
        dirichlet_indices(data, n_silos, alpha, min_size, rng)?,
    ))
}

/// Whether the MNIST pair silos may share images.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum PairSampling {
    /// No image is in two silos (needs about 5·n_m images of every digit: scale ≲ 0.2).
    #[default]
    Disjoint,
    /// Each silo samples without replacement on its own; silos may share images (needed for
    /// scale up to 1, where every silo holds all n_m images of its digits, as at full scale in
    /// Woodworth et al.).
    PerSilo,
}

/// The MNIST even/odd digit-pair federation of Lowy & Razaviyayn §6 / App. I.1, following
/// Woodworth, Patel & Srebro (2020b).
///
/// **How the paper is read.** There are 25 silos, one per (even e, odd o) pair, in the order
/// (0,1), (0,3), …, (0,9), (2,1), …, (8,9). Labels are even = 1, odd = 0. With c_min the
/// count of the rarest digit (5421 for digit 5 in the MNIST training set), each silo holds
/// 2·n_m examples with n_m = ⌊c_min·scale⌋ (scale = 1/7 gives n_m = 774, 1548 examples,
/// 1238 after the 80/20 split: the paper's n). A fraction 1 − p of a silo's examples comes
/// from its own pair, the fraction p from the pooled data of all ten digits:
/// n_own = round(2·n_m·(1 − p)) and n_mix = 2·n_m − n_own, as in the paper's code; p = 0 is
/// fully heterogeneous (the paper's setting), p = 1 homogeneous. The pooled data holds n_m
/// examples of every digit, so mixed examples are uniform over digits.
///
/// **Decisions where the paper (or its code) is ambiguous or undesirable.**
/// * The code resamples each silo's examples *with replacement* from fixed pools (the first
///   n_m images of each digit), so a silo holds repeated images and, because every digit
///   sits in five silos, the same image appears in several silos. Here sampling is without
///   replacement: the pair part is a uniformly random n_own-subset of the pair's 2·n_m
///   slots (so it holds exactly n_m of each digit when p = 0), the pooled part a uniformly
///   random n_mix-subset of the 10·n_m pooled slots, and every slot is then filled by a
///   distinct random image of its digit.
/// * With [`PairSampling::Disjoint`] (default) no image is in two silos, which is what
///   separate silos of records mean for ISRL-DP; at scale 1/7 each digit supplies 5·774 =
///   3870 ≤ 5421 images. Larger scales need [`PairSampling::PerSilo`].
/// * The code fits PCA before partitioning; this function only partitions (run PCA on the
///   whole training set first, see [`crate::data::pca`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MnistPairs {
    /// Mixing fraction in [0, 1].
    pub p: f64,
    /// Fraction of the rarest digit's count used per digit, in (0, 1].
    pub scale: f64,
    /// Whether the digits' records are drawn with or without replacement.
    pub sampling: PairSampling,
}

impl Default for MnistPairs {
    /// The paper's setting: p = 0, scale 1/7, disjoint silos.
    fn default() -> Self {
        MnistPairs {
            p: 0.0,
            scale: default_scale(),
            sampling: PairSampling::Disjoint,
        }
    }
}

/// The (even, odd) digit pair of each of the 25 silos, in silo order.
pub fn mnist_pair_digits() -> Vec<(usize, usize)> {
    (0..5)
        .flat_map(|e| (0..5).map(move |o| (2 * e, 2 * o + 1)))
        .collect()
}

/// Row indices of the 25 digit-pair silos of a data set with digit labels 0..9.
pub fn mnist_pairs_indices(
    data: &Dataset,
    cfg: &MnistPairs,
    rng: &mut DpRng,
) -> Result<Vec<Vec<usize>>> {
    if data.target().num_classes() != Some(10) {
        return Err(Error::config(
            "partition.kind",
            "mnist_pairs needs a target with the ten digit classes 0..9",
        ));
    }
    if !(0.0..=1.0).contains(&cfg.p) {
        return Err(Error::config(
            "partition.p",
            format!("must lie in [0, 1], got {}", cfg.p),
        ));
    }
    if !(cfg.scale > 0.0 && cfg.scale <= 1.0) {
        return Err(Error::config(
            "partition.scale",
            format!("must lie in (0, 1], got {}", cfg.scale),
        ));
    }
    let mut by_digit: Vec<Vec<usize>> = vec![Vec::new(); 10];
    data.y()
        .iter()
        .enumerate()
        .for_each(|(i, &v)| by_digit[v as usize].push(i));
    let c_min = by_digit.iter().map(Vec::len).min().unwrap_or(0);
    // The tiny slack keeps e.g. 5420·0.2 = 1084 from flooring to 1083 through rounding error.
    let n_m = ((c_min as f64) * cfg.scale + 1e-9).floor() as usize;
    if n_m == 0 {
        return Err(Error::data(
            "partition mnist_pairs",
            format!(
                "the rarest digit has {c_min} rows, so scale {} leaves no examples per digit",
                cfg.scale
            ),
        ));
    }
    let n_own = ((2 * n_m) as f64 * (1.0 - cfg.p)).round() as usize;
    let n_mix = 2 * n_m - n_own;

    let mut cursor = [0usize; 10];
    if cfg.sampling == PairSampling::Disjoint {
        by_digit.iter_mut().for_each(|pool| shuffle(rng, pool));
    }
    let mut slots = Vec::new();
    let mut silos = Vec::with_capacity(25);
    for (e, o) in mnist_pair_digits() {
        let mut need = [0usize; 10];
        if n_own > 0 {
            choose_subset(rng, 2 * n_m, n_own, &mut slots)?;
            let k_e = slots.iter().filter(|&&s| s < n_m).count();
            need[e] += k_e;
            need[o] += n_own - k_e;
        }
        if n_mix > 0 {
            choose_subset(rng, 10 * n_m, n_mix, &mut slots)?;
            slots.iter().for_each(|&s| need[s / n_m] += 1);
        }
        let mut rows = Vec::with_capacity(2 * n_m);
        for (digit, &k) in need.iter().enumerate().filter(|(_, k)| **k > 0) {
            let pool = &by_digit[digit];
            match cfg.sampling {
                PairSampling::Disjoint => {
                    let start = cursor[digit];
                    if start + k > pool.len() {
                        return Err(Error::data(
                            "partition mnist_pairs",
                            format!(
                                "digit {digit} has {} images, too few for disjoint silos at scale {} \
                                 (n_m = {n_m}); lower the scale or use sampling = \"per-silo\"",
                                pool.len(),
                                cfg.scale
                            ),
                        ));
                    }
                    rows.extend_from_slice(&pool[start..start + k]);
                    cursor[digit] += k;
                }
                PairSampling::PerSilo => {
                    choose_subset(rng, pool.len(), k, &mut slots)?;
                    rows.extend(slots.iter().map(|&s| pool[s]));
                }
            }
        }
        silos.push(rows);
    }
    Ok(silos)
}

/// The 25 digit-pair silos with labels even = 1, odd = 0 (classes `["odd", "even"]`).
pub fn mnist_pairs(data: &Dataset, cfg: &MnistPairs, rng: &mut DpRng) -> Result<Vec<Dataset>> {
    let parts = mnist_pairs_indices(data, cfg, rng)?;
    let target = Target::Classes {
        names: vec!["odd".into(), "even".into()],
    };
    to_datasets(data, parts)
        .into_iter()
        .map(|d| {
            d.map_target(target.clone(), |v| {
                f64::from(u8::from((v as u32).is_multiple_of(2)))
            })
        })
        .collect()
}

/// Splits every silo at random into train and test with ⌈test_fraction·n⌉ test rows.
pub fn train_test_split(
    silos: Vec<Dataset>,
    test_fraction: f64,
    rng: &mut DpRng,
) -> Result<Vec<SiloData>> {
    if !(0.0..1.0).contains(&test_fraction) {
        return Err(Error::config(
            "split.test_fraction",
            format!("must lie in [0, 1), got {test_fraction}"),
        ));
    }
    let mut test_idx = Vec::new();
    silos
        .into_iter()
        .enumerate()
        .map(|(s, d)| {
            let n = d.len();
            // The slack keeps 0.2·135 = 27.000000000000004 from rounding up to 28.
            let n_test = ((test_fraction * n as f64) - 1e-9).ceil().max(0.0) as usize;
            if n_test >= n {
                return Err(Error::data(
                    format!("silo {s}"),
                    format!("{n} rows leave no training rows at test fraction {test_fraction}"),
                ));
            }
            test_idx.clear();
            if n_test > 0 {
                choose_subset(rng, n, n_test, &mut test_idx)?;
            }
            let mut is_test = vec![false; n];
            test_idx.iter().for_each(|&i| is_test[i] = true);
            let train_idx: Vec<usize> = (0..n).filter(|&i| !is_test[i]).collect();
            Ok(SiloData {
                train: d.subset(&train_idx),
                test: d.subset(&test_idx),
            })
        })
        .collect()
}

/// Drops uniformly random training rows so every silo has the smallest silo's training size;
/// test parts are untouched.
pub fn balance_train(silos: Vec<SiloData>, rng: &mut DpRng) -> Result<Vec<SiloData>> {
    let Some(n_min) = silos.iter().map(|s| s.train.len()).min() else {
        return Ok(silos);
    };
    if n_min == 0 {
        return Err(Error::data("balance", "a silo has no training rows"));
    }
    let mut keep = Vec::new();
    silos
        .into_iter()
        .map(|s| {
            if s.train.len() == n_min {
                return Ok(s);
            }
            choose_subset(rng, s.train.len(), n_min, &mut keep)?;
            Ok(SiloData {
                train: s.train.subset(&keep),
                test: s.test,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linalg::Matrix;
    use dpfl_privacy::rng::Purpose;

    fn rng(seed: u64) -> DpRng {
        DpRng::from_seed(seed, Purpose::Data, 0)
    }

    fn labelled(y: Vec<f64>, classes: usize) -> Dataset {
        let n = y.len();
        let x = Matrix::from_vec(n, 1, (0..n).map(|i| i as f64).collect()).unwrap();
        let target = Target::Classes {
            names: (0..classes).map(|c| c.to_string()).collect(),
        };
        Dataset::new(x, y, target, vec!["i".into()]).unwrap()
    }

    #[test]
    fn sorted_target_groups() {
        let y: Vec<f64> = (0..10).rev().map(f64::from).collect();
        let g = sorted_target_indices(&y, 3).unwrap();
        // ⌈10/3⌉ = 4: sizes 4, 4, 2; ascending y means descending row index.
        assert_eq!(g, vec![vec![9, 8, 7, 6], vec![5, 4, 3, 2], vec![1, 0]]);
        // n = 9, N = 4: ⌈9/4⌉ = 3 and 3·3 = 9 leaves the last silo empty.
        assert!(sorted_target_indices(&y[..9], 4).is_err());
    }

    #[test]
    fn iid_sizes_and_cover() {
        let parts = iid_indices(10, 3, &mut rng(1)).unwrap();
        assert_eq!(
            parts.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![4, 3, 3]
        );
        let mut all: Vec<usize> = parts.concat();
        all.sort_unstable();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        assert!(iid_indices(2, 3, &mut rng(1)).is_err());
    }

    #[test]
    fn split_rounds_like_scikit_learn() {
        let d = labelled(vec![0.0; 135], 1);
        let s = train_test_split(vec![d], 0.2, &mut rng(2)).unwrap();
        assert_eq!((s[0].train.len(), s[0].test.len()), (108, 27));
        let d = labelled(vec![0.0; 1548], 1);
        let s = train_test_split(vec![d], 0.2, &mut rng(2)).unwrap();
        assert_eq!((s[0].train.len(), s[0].test.len()), (1238, 310));
        // Train and test are disjoint and cover the silo (feature = row index).
        let mut rows: Vec<f64> = (0..s[0].train.len())
            .map(|i| s[0].train.x().row(i)[0])
            .chain((0..s[0].test.len()).map(|i| s[0].test.x().row(i)[0]))
            .collect();
        rows.sort_by(f64::total_cmp);
        assert_eq!(rows, (0..1548).map(f64::from).collect::<Vec<_>>());
        assert!(train_test_split(vec![labelled(vec![0.0], 1)], 1.0, &mut rng(2)).is_err());
    }

    #[test]
    fn spec_reads_from_toml() {
        let s: PartitionSpec = toml::from_str("kind = \"mnist-pairs\"\np = 0.5").unwrap();
        assert_eq!(
            s,
            PartitionSpec::MnistPairs {
                p: 0.5,
                scale: 1.0 / 7.0,
                sampling: PairSampling::Disjoint
            }
        );
        let s: PartitionSpec =
            toml::from_str("kind = \"dirichlet\"\nsilos = 4\nalpha = 0.3").unwrap();
        assert_eq!(
            s,
            PartitionSpec::Dirichlet {
                silos: 4,
                alpha: 0.3,
                min_size: 1
            }
        );
        assert!(toml::from_str::<PartitionSpec>("kind = \"iid\"\nsilo = 4").is_err());
    }
}
