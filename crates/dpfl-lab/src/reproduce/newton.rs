//! The minimiser w* of the federated training objective F̂(w) = (1/N) Σ_i F̂_i(w) by damped
//! Newton's method, and the heterogeneity v_*² = (1/N) Σ_i ‖∇F̂_i(w*)‖² that Lowy & Razaviyayn
//! report for their experiments (App. I.1–I.2, following Woodworth et al. 2020b).
//!
//! The Hessian is formed column by column from central differences of the exact gradient
//! (d gradient passes), which works for every [`Model`] without a second-derivative API; the
//! step solves (H + λI) p = ∇F̂ by Cholesky, with λ raised until H + λI is positive definite
//! (softmax regression has a flat direction: adding one vector to every class's weights), and
//! a backtracking line search keeps F̂ decreasing. Non-private: an observer's diagnostic.

use dpfl::data::SiloData;
use dpfl::linalg::{axpy, norm2};
use dpfl::model::{Model, mean_loss};

/// What Newton's method found.
#[derive(Debug, Clone)]
pub struct Optimum {
    /// w*, the minimiser found.
    pub w: Vec<f64>,
    /// F̂(w*).
    pub value: f64,
    /// ‖∇F̂(w*)‖.
    pub grad_norm: f64,
    /// v_*² = (1/N) Σ_i ‖∇F̂_i(w*)‖².
    pub v_star_sq: f64,
    /// Newton steps taken.
    pub iterations: usize,
}

fn silo_grad(model: &dyn Model, w: &[f64], s: &SiloData, out: &mut [f64]) {
    out.iter_mut().for_each(|v| *v = 0.0);
    let n = s.train.len();
    if n == 0 {
        return;
    }
    let idx: Vec<usize> = (0..n).collect();
    model.add_batch_grad(w, &s.train, &idx, 1.0 / n as f64, out);
}

fn objective(model: &dyn Model, w: &[f64], silos: &[SiloData]) -> f64 {
    silos
        .iter()
        .map(|s| mean_loss(model, w, &s.train))
        .sum::<f64>()
        / silos.len() as f64
}

fn gradient(model: &dyn Model, w: &[f64], silos: &[SiloData], out: &mut [f64]) {
    let mut g = vec![0.0; out.len()];
    out.iter_mut().for_each(|v| *v = 0.0);
    for s in silos {
        silo_grad(model, w, s, &mut g);
        axpy(1.0 / silos.len() as f64, &g, out);
    }
}

/// Solves (H + λI) x = b for symmetric H (row-major d×d) by Cholesky; `None` if not positive
/// definite.
fn cholesky_solve(h: &[f64], lambda: f64, b: &[f64]) -> Option<Vec<f64>> {
    let d = b.len();
    let mut l = vec![0.0; d * d];
    for i in 0..d {
        for j in 0..=i {
            let mut s = h[i * d + j] + if i == j { lambda } else { 0.0 };
            for k in 0..j {
                s -= l[i * d + k] * l[j * d + k];
            }
            if i == j {
                if !(s > 0.0 && s.is_finite()) {
                    return None;
                }
                l[i * d + i] = s.sqrt();
            } else {
                l[i * d + j] = s / l[j * d + j];
            }
        }
    }
    let mut y = b.to_vec();
    for i in 0..d {
        for k in 0..i {
            y[i] -= l[i * d + k] * y[k];
        }
        y[i] /= l[i * d + i];
    }
    for i in (0..d).rev() {
        for k in i + 1..d {
            y[i] -= l[k * d + i] * y[k];
        }
        y[i] /= l[i * d + i];
    }
    Some(y)
}

/// Minimises F̂ from w = 0 (at most `max_iter` Newton steps) and computes v_*².
pub fn minimize(model: &dyn Model, silos: &[SiloData], max_iter: usize) -> dpfl::Result<Optimum> {
    if silos.is_empty() {
        return Err(dpfl::Error::data("newton", "no silos"));
    }
    let d = model.num_params();
    let mut w = vec![0.0; d];
    let mut g = vec![0.0; d];
    let (mut gp, mut gm) = (vec![0.0; d], vec![0.0; d]);
    let mut h = vec![0.0; d * d];
    let mut f = objective(model, &w, silos);
    let mut iterations = 0;
    for _ in 0..max_iter {
        gradient(model, &w, silos, &mut g);
        let gn = norm2(&g);
        if gn <= 1e-10 * (1.0 + f.abs()) {
            break;
        }
        iterations += 1;
        // Central differences; the step scales with w so that large weights keep precision.
        let eps = 1e-5 * (1.0 + norm2(&w) / (d as f64).sqrt());
        for j in 0..d {
            let wj = w[j];
            w[j] = wj + eps;
            gradient(model, &w, silos, &mut gp);
            w[j] = wj - eps;
            gradient(model, &w, silos, &mut gm);
            w[j] = wj;
            for i in 0..d {
                h[i * d + j] = (gp[i] - gm[i]) / (2.0 * eps);
            }
        }
        // Symmetrise the finite-difference Hessian.
        for i in 0..d {
            for j in 0..i {
                let m = 0.5 * (h[i * d + j] + h[j * d + i]);
                h[i * d + j] = m;
                h[j * d + i] = m;
            }
        }
        let scale = (0..d).map(|i| h[i * d + i].abs()).fold(0.0, f64::max);
        let mut lambda = 1e-10 * scale.max(1e-300);
        let p = loop {
            if let Some(p) = cholesky_solve(&h, lambda, &g) {
                break p;
            }
            lambda *= 10.0;
            if !lambda.is_finite() {
                return Err(dpfl::Error::data("newton", "Hessian is not finite"));
            }
        };
        // Backtracking (Armijo) line search along −p.
        let slope = dpfl::linalg::dot(&g, &p);
        let mut t = 1.0;
        let mut accepted = false;
        for _ in 0..40 {
            let cand: Vec<f64> = w.iter().zip(&p).map(|(a, b)| a - t * b).collect();
            let fc = objective(model, &cand, silos);
            if fc.is_finite() && fc <= f - 1e-4 * t * slope {
                w = cand;
                f = fc;
                accepted = true;
                break;
            }
            t *= 0.5;
        }
        if !accepted {
            break;
        }
    }
    gradient(model, &w, silos, &mut g);
    let grad_norm = norm2(&g);
    let mut v = 0.0;
    for s in silos {
        silo_grad(model, &w, s, &mut gp);
        v += dpfl::linalg::dot(&gp, &gp);
    }
    Ok(Optimum {
        value: f,
        grad_norm,
        v_star_sq: v / silos.len() as f64,
        w,
        iterations,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpfl::data::{Dataset, Target};
    use dpfl::linalg::Matrix;
    use dpfl::model::LinearRegression;

    fn silo(x: Vec<f64>, y: Vec<f64>, cols: usize) -> SiloData {
        let rows = y.len();
        let train = Dataset::new(
            Matrix::from_vec(rows, cols, x).unwrap(),
            y,
            Target::Real,
            (0..cols).map(|i| format!("x{i}")).collect(),
        )
        .unwrap();
        let test = train.subset(&[0]);
        SiloData { train, test }
    }

    #[test]
    fn least_squares_optimum_and_heterogeneity_by_hand() {
        // Two silos, one feature (an intercept): F_i(w) = mean (w − y)²/2, so ∇F_i(w) = w − ȳ_i.
        // Silo means 1 and 3: w* = 2, ∇F_1(w*) = 1, ∇F_2(w*) = −1, v_*² = (1 + 1)/2 = 1.
        let silos = vec![
            silo(vec![1.0, 1.0], vec![0.0, 2.0], 1),
            silo(vec![1.0, 1.0, 1.0], vec![3.0, 3.0, 3.0], 1),
        ];
        let m = LinearRegression::new(1);
        let o = minimize(&m, &silos, 20).unwrap();
        assert!((o.w[0] - 2.0).abs() < 1e-8, "{:?}", o.w);
        assert!((o.v_star_sq - 1.0).abs() < 1e-8, "{}", o.v_star_sq);
        // F̂(2) = ((4 + 0)/2/2 + 1/2)/2 = (1 + 0.5)/2 = 0.75.
        assert!((o.value - 0.75).abs() < 1e-10, "{}", o.value);
        assert!(o.grad_norm < 1e-8);
    }
}
