//! Operators' helpers shared by `dpfl server`, `silo` and `shuffler`: the Prometheus
//! endpoint (`--metrics-addr`, `dpfl_net::metrics`).

use dpfl_net::metrics::Role;

/// Starts the `/metrics` endpoint of `role` on `addr` when given (inside the process's
/// runtime); says where on standard error.
pub async fn metrics(addr: Option<&str>, role: Role) -> dpfl_net::error::Result<()> {
    if let Some(a) = addr {
        dpfl_net::metrics::enable(role);
        let local = dpfl_net::metrics::serve(a).await?;
        eprintln!("metrics: http://{local}/metrics");
    }
    Ok(())
}
