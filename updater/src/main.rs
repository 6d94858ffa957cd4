use clap::Parser;

/// tas-updater (not implemented yet).
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {}

fn main() {
    let _args = Args::parse();
}
