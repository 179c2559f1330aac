//! Wings defined outside this crate (issue 28 item 6, "the next paper costs one folder"): a
//! type that implements [`Wing`] and [`ExternalWing`], with a plan that implements
//! [`WingHalves`], is registered once per program under its own `kind`
//! (`AlgorithmSpec::register::<MyWing>()`), and from then on a config with `kind = "<its
//! kind>"` is an [`AlgorithmSpec::Custom`](super::spec::AlgorithmSpec) like any built-in
//! one: the experiment files, the plan a federation file holds, the simulator, `dpfl-net`'s
//! server and silos and the reproductions' grids read it through the same methods, because
//! every one of them goes through `AlgorithmSpec` and `WingPlan` (`spec.rs`).
//!
//! This file is the object-safe face of [`Wing`] (`DynWing`, private) and the table of
//! registered kinds. A registered wing keeps every rule a built-in one has: it says whether and
//! how it is private (no default), its silo half's round event comes from its own mechanism
//! and the round core charges it to the silo's ledger, its server half sees only messages.
//! What it cannot do is run in a program that did not register it (the `dpfl` binary knows
//! only the built-in kinds): reading such a config there fails with the kind named.
//!
//! Values cross the table as `serde_json::Value`: a config's or a plan's fields are read into
//! one and decoded by the registered type; a `None` field is written absent (TOML has no null),
//! which serde's derive reads back as `None`.

use std::any::{Any, TypeId};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{PoisonError, RwLock};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::checked::{ParamError, ParamGuard};
use super::context::BuildContext;
use super::half::{ServerHalf, SiloHalf};
use super::wing::{AuditView, Knobs, NoiseMultiplier, Planned, Privacy, Requirements, Wing};

/// A registered wing's plan: what its halves are built from, serialisable (a federation file
/// carries it to every process), building one half each and calibrating nothing.
pub trait WingHalves:
    Serialize + DeserializeOwned + Clone + PartialEq + fmt::Debug + Send + Sync + 'static
{
    /// The number of silo halves the plan builds.
    fn silos(&self) -> usize;
    /// The fewest silos a shuffled batch must hold for the plan's guarantee when
    /// `participants` silos answer; `None` for a plan without a shuffle stage.
    fn quorum(&self, participants: usize) -> Option<usize>;
    /// The server half (public facts only: `ctx` holds no data).
    fn server_half(&self, ctx: &BuildContext) -> crate::Result<Box<dyn ServerHalf>>;
    /// Silo `silo`'s half.
    fn silo_half(&self, ctx: &BuildContext, silo: usize) -> crate::Result<Box<dyn SiloHalf>>;
}

/// A wing defined outside this crate: its config type, registered under [`Self::KIND`].
pub trait ExternalWing:
    Wing<Plan: WingHalves>
    + Serialize
    + DeserializeOwned
    + Clone
    + PartialEq
    + fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// The `kind` a config names it by (lower-case letters, digits and `-`; no built-in
    /// kind). Its config has no field named `kind`.
    const KIND: &'static str;
}

/// [`Wing`] as a trait object (the config of a registered wing).
trait DynWing: Send + Sync {
    fn kind(&self) -> &'static str;
    fn label(&self) -> String;
    fn privacy(&self) -> Privacy;
    fn noise_multiplier(&self) -> NoiseMultiplier;
    fn knobs(&self) -> Knobs;
    fn tuned(&self, step_size: f64, batch: Option<usize>) -> Box<dyn DynWing>;
    fn requirements(&self) -> Requirements;
    fn extended_metrics(&self) -> bool;
    fn check(&self) -> Result<(), ParamError>;
    fn plan(&self, ctx: &BuildContext) -> crate::Result<Planned<CustomPlan>>;
    fn to_value(&self) -> Result<serde_json::Value, serde_json::Error>;
    fn clone_box(&self) -> Box<dyn DynWing>;
    fn as_any(&self) -> &dyn Any;
    fn eq_dyn(&self, other: &dyn DynWing) -> bool;
    fn debug(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

impl<W: ExternalWing> DynWing for W {
    fn kind(&self) -> &'static str {
        W::KIND
    }
    fn label(&self) -> String {
        Wing::label(self)
    }
    fn privacy(&self) -> Privacy {
        Wing::privacy(self)
    }
    fn noise_multiplier(&self) -> NoiseMultiplier {
        Wing::noise_multiplier(self)
    }
    fn knobs(&self) -> Knobs {
        Wing::knobs(self)
    }
    fn tuned(&self, step_size: f64, batch: Option<usize>) -> Box<dyn DynWing> {
        Box::new(Wing::tuned(self, step_size, batch))
    }
    fn requirements(&self) -> Requirements {
        Wing::requirements(self)
    }
    fn extended_metrics(&self) -> bool {
        Wing::extended_metrics(self)
    }
    fn check(&self) -> Result<(), ParamError> {
        ParamGuard::check(self).map(|_| ())
    }
    fn plan(&self, ctx: &BuildContext) -> crate::Result<Planned<CustomPlan>> {
        let params = ParamGuard::check(self)?;
        let p = W::plan(&params, ctx)?;
        let audit = Wing::audit_view(self, &p.plan);
        Ok(Planned {
            calibration: p.calibration,
            plan: CustomPlan {
                kind: W::KIND,
                audit,
                plan: Box::new(p.plan),
            },
            built: p.built,
        })
    }
    fn to_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::to_value(self)
    }
    fn clone_box(&self) -> Box<dyn DynWing> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn eq_dyn(&self, other: &dyn DynWing) -> bool {
        other.as_any().downcast_ref::<W>() == Some(self)
    }
    fn debug(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// [`WingHalves`] as a trait object.
trait DynPlan: Send + Sync {
    fn silos(&self) -> usize;
    fn quorum(&self, participants: usize) -> Option<usize>;
    fn server_half(&self, ctx: &BuildContext) -> crate::Result<Box<dyn ServerHalf>>;
    fn silo_half(&self, ctx: &BuildContext, silo: usize) -> crate::Result<Box<dyn SiloHalf>>;
    fn to_value(&self) -> Result<serde_json::Value, serde_json::Error>;
    fn clone_box(&self) -> Box<dyn DynPlan>;
    fn as_any(&self) -> &dyn Any;
    fn eq_dyn(&self, other: &dyn DynPlan) -> bool;
    fn debug(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

impl<P: WingHalves> DynPlan for P {
    fn silos(&self) -> usize {
        WingHalves::silos(self)
    }
    fn quorum(&self, participants: usize) -> Option<usize> {
        WingHalves::quorum(self, participants)
    }
    fn server_half(&self, ctx: &BuildContext) -> crate::Result<Box<dyn ServerHalf>> {
        WingHalves::server_half(self, ctx)
    }
    fn silo_half(&self, ctx: &BuildContext, silo: usize) -> crate::Result<Box<dyn SiloHalf>> {
        WingHalves::silo_half(self, ctx, silo)
    }
    fn to_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::to_value(self)
    }
    fn clone_box(&self) -> Box<dyn DynPlan> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn eq_dyn(&self, other: &dyn DynPlan) -> bool {
        other.as_any().downcast_ref::<P>() == Some(self)
    }
    fn debug(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// The config of a registered wing ([`ExternalWing`]): what `AlgorithmSpec::Custom` holds.
/// Written as the wing's own fields plus `kind`.
pub struct CustomSpec {
    wing: Box<dyn DynWing>,
}

impl CustomSpec {
    /// `wing` as a config (its kind need not be registered to build or plan it here; reading
    /// it back from a file needs the registration).
    pub fn new<W: ExternalWing>(wing: W) -> Self {
        CustomSpec {
            wing: Box::new(wing),
        }
    }
    /// The registered kind.
    pub fn kind(&self) -> &'static str {
        self.wing.kind()
    }
    /// The config as the wing's own type, if it is a `W`.
    pub fn get<W: ExternalWing>(&self) -> Option<&W> {
        self.wing.as_any().downcast_ref::<W>()
    }
}

impl Clone for CustomSpec {
    fn clone(&self) -> Self {
        CustomSpec {
            wing: self.wing.clone_box(),
        }
    }
}

impl PartialEq for CustomSpec {
    fn eq(&self, other: &Self) -> bool {
        self.wing.eq_dyn(other.wing.as_ref())
    }
}

impl fmt::Debug for CustomSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.wing.debug(f)
    }
}

impl Serialize for CustomSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        let mut value = self.wing.to_value().map_err(S::Error::custom)?;
        let serde_json::Value::Object(fields) = &mut value else {
            return Err(S::Error::custom(format!(
                "the config of `{}` is not a table",
                self.kind()
            )));
        };
        fields.insert("kind".into(), self.kind().into());
        strip_nulls(&mut value);
        value.serialize(s)
    }
}

impl ParamGuard for CustomSpec {
    type Checked = CustomSpec;
    fn check(&self) -> Result<CustomSpec, ParamError> {
        self.wing.check()?;
        Ok(self.clone())
    }
}

impl Wing for CustomSpec {
    type Plan = CustomPlan;

    fn label(&self) -> String {
        self.wing.label()
    }
    fn privacy(&self) -> Privacy {
        self.wing.privacy()
    }
    fn noise_multiplier(&self) -> NoiseMultiplier {
        self.wing.noise_multiplier()
    }
    fn knobs(&self) -> Knobs {
        self.wing.knobs()
    }
    fn tuned(&self, step_size: f64, batch: Option<usize>) -> Self {
        CustomSpec {
            wing: self.wing.tuned(step_size, batch),
        }
    }
    fn requirements(&self) -> Requirements {
        self.wing.requirements()
    }
    fn extended_metrics(&self) -> bool {
        self.wing.extended_metrics()
    }
    fn audit_view(&self, plan: &CustomPlan) -> AuditView {
        plan.audit
    }
    fn plan(params: &CustomSpec, ctx: &BuildContext) -> crate::Result<Planned<CustomPlan>> {
        params.wing.plan(ctx)
    }
}

/// A registered wing's plan: what `WingPlan::Custom` holds. Written as `kind`, the audit view
/// the wing gave for it, and the wing's own plan (`plan`).
pub struct CustomPlan {
    kind: &'static str,
    audit: AuditView,
    plan: Box<dyn DynPlan>,
}

impl CustomPlan {
    /// The registered kind whose plan this is.
    pub fn kind(&self) -> &'static str {
        self.kind
    }
    /// The plan as the wing's own type, if it is a `P`.
    pub fn get<P: WingHalves>(&self) -> Option<&P> {
        self.plan.as_any().downcast_ref::<P>()
    }
    /// The number of silo halves.
    pub fn silos(&self) -> usize {
        self.plan.silos()
    }
    /// See [`WingHalves::quorum`].
    pub fn quorum(&self, participants: usize) -> Option<usize> {
        self.plan.quorum(participants)
    }
    /// The server half.
    pub fn server_half(&self, ctx: &BuildContext) -> crate::Result<Box<dyn ServerHalf>> {
        self.plan.server_half(ctx)
    }
    /// Silo `silo`'s half.
    pub fn silo_half(&self, ctx: &BuildContext, silo: usize) -> crate::Result<Box<dyn SiloHalf>> {
        self.plan.silo_half(ctx, silo)
    }
}

impl Clone for CustomPlan {
    fn clone(&self) -> Self {
        CustomPlan {
            kind: self.kind,
            audit: self.audit,
            plan: self.plan.clone_box(),
        }
    }
}

impl PartialEq for CustomPlan {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
            && self.audit == other.audit
            && self.plan.eq_dyn(other.plan.as_ref())
    }
}

impl fmt::Debug for CustomPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CustomPlan {{ kind: {:?}, audit: {:?}, plan: ",
            self.kind, self.audit
        )?;
        self.plan.debug(f)?;
        f.write_str(" }")
    }
}

/// How a [`CustomPlan`] is written.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanRepr {
    kind: String,
    audit: AuditView,
    plan: serde_json::Value,
}

impl Serialize for CustomPlan {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        let mut plan = self.plan.to_value().map_err(S::Error::custom)?;
        strip_nulls(&mut plan);
        PlanRepr {
            kind: self.kind.to_string(),
            audit: self.audit,
            plan,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for CustomPlan {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let repr = PlanRepr::deserialize(d)?;
        let entry = lookup(&repr.kind).ok_or_else(|| D::Error::custom(unregistered(&repr.kind)))?;
        let plan = (entry.plan_from)(repr.plan)
            .map_err(|e| D::Error::custom(format!("the plan of `{}`: {e}", repr.kind)))?;
        Ok(CustomPlan {
            kind: entry.kind,
            audit: repr.audit,
            plan,
        })
    }
}

/// Removes every null from `v`'s tables (a `None` field; TOML has no null).
fn strip_nulls(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        serde_json::Value::Null
        | serde_json::Value::Bool(_)
        | serde_json::Value::Number(_)
        | serde_json::Value::String(_) => {}
    }
}

/// One registered kind: its type and how its config and plan are read.
#[derive(Clone, Copy)]
struct Entry {
    kind: &'static str,
    type_id: TypeId,
    spec_from: fn(serde_json::Value) -> Result<CustomSpec, serde_json::Error>,
    plan_from: fn(serde_json::Value) -> Result<Box<dyn DynPlan>, serde_json::Error>,
}

static REGISTRY: RwLock<BTreeMap<&'static str, Entry>> = RwLock::new(BTreeMap::new());

fn spec_from<W: ExternalWing>(v: serde_json::Value) -> Result<CustomSpec, serde_json::Error> {
    Ok(CustomSpec::new(serde_json::from_value::<W>(v)?))
}

fn plan_from<W: ExternalWing>(v: serde_json::Value) -> Result<Box<dyn DynPlan>, serde_json::Error> {
    Ok(Box::new(serde_json::from_value::<W::Plan>(v)?))
}

fn lookup(kind: &str) -> Option<Entry> {
    REGISTRY
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(kind)
        .copied()
}

fn unregistered(kind: &str) -> String {
    format!(
        "no wing of kind `{kind}` is registered in this program (registered: {:?}; a wing \
         defined outside dpfl is registered with AlgorithmSpec::register)",
        registered()
    )
}

/// Adds `W` under `W::KIND` (`is_builtin` says whether a kind is a built-in one, which is
/// refused). Registering the same type again is a no-op; another type under a kind taken is
/// an error.
pub(crate) fn insert<W: ExternalWing>(is_builtin: fn(&str) -> bool) -> crate::Result<()> {
    let kind = W::KIND;
    let well_formed = !kind.is_empty()
        && kind
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !well_formed {
        return Err(crate::Error::config(
            "kind",
            format!("`{kind}`: a kind is lower-case letters, digits and `-`"),
        ));
    }
    if is_builtin(kind) {
        return Err(crate::Error::config(
            "kind",
            format!("`{kind}` is a built-in algorithm; a registered wing needs its own kind"),
        ));
    }
    let mut table = REGISTRY.write().unwrap_or_else(PoisonError::into_inner);
    match table.get(kind) {
        Some(e) if e.type_id == TypeId::of::<W>() => Ok(()),
        Some(_) => Err(crate::Error::config(
            "kind",
            format!("`{kind}` is already registered for another type"),
        )),
        None => {
            table.insert(
                kind,
                Entry {
                    kind,
                    type_id: TypeId::of::<W>(),
                    spec_from: spec_from::<W>,
                    plan_from: plan_from::<W>,
                },
            );
            Ok(())
        }
    }
}

/// The config of registered kind `kind` read from `fields` (without `kind`); `None` if no
/// wing of that kind is registered.
pub(crate) fn read_spec(
    kind: &str,
    fields: serde_json::Value,
) -> Option<Result<CustomSpec, serde_json::Error>> {
    lookup(kind).map(|e| (e.spec_from)(fields))
}

/// Whether any wing is registered (a program that registers none, as the CLI, reads its
/// configs straight through the derive).
pub(crate) fn any_registered() -> bool {
    !REGISTRY
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .is_empty()
}

/// Whether a wing of kind `kind` is registered.
pub(crate) fn is_registered(kind: &str) -> bool {
    lookup(kind).is_some()
}

/// The kinds registered in this program.
pub fn registered() -> Vec<&'static str> {
    REGISTRY
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .keys()
        .copied()
        .collect()
}
