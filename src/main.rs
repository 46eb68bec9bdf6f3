fn main() -> std::process::ExitCode {
    owl::run()
}
