//! Running a procedure: argv (never a shell), a clean environment, a fresh working directory.
