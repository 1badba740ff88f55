// Linked into every Phasor target of a -DPHASOR_SANITIZE=address build
// (top-level CMakeLists.txt): LeakSanitizer's built-in suppressions, read at
// start-up, so every test and fuzz target gets them without LSAN_OPTIONS.
//
// libomp (clang's OpenMP runtime) keeps per-thread descriptors of its
// worker pool until process exit and never frees them; LSan reports them as
// direct leaks from malloc inside libomp.so with no Phasor frame. Anything
// Phasor leaks has a Phasor frame and stays reported.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libomp.so\n";
}
