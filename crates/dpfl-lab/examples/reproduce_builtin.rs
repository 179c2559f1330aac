//! Runs one built-in reproduction with the library alone (what `dpfl reproduce ID --out DIR`
//! does, without the CLI's progress bar and checkpoint), for machines where only the library's
//! test-profile artifacts are built. Usage: `reproduce_builtin ID OUT_DIR [--quick]`.
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(id), Some(out)) = (args.first(), args.get(1)) else {
        return Err("usage: reproduce_builtin ID OUT_DIR [--quick]".into());
    };
    let mut spec = dpfl_lab::reproduce::builtin(id)?;
    if args.iter().any(|a| a == "--quick") {
        spec = spec.quick();
    }
    let out_dir = PathBuf::from(out);
    dpfl_lab::output::prepare_out_dir(&out_dir)?;
    let result = dpfl_lab::reproduce::run(&spec, None, &|_, _| {})?;
    let files = dpfl_lab::reproduce::write_outputs(&spec, &result, &out_dir)?;
    println!(
        "{}: {} runs ({} trials) in {:.1} s",
        spec.id, result.runs, spec.trials, result.wall_seconds
    );
    for f in files {
        println!("wrote {}", f.display());
    }
    Ok(())
}
