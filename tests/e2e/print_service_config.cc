// Prints the C++ client's default service config, kDefaultServiceConfig, as
// the library embedded it at build time: for test_service_config.py, which
// compares it with client/service_config.json and with what the Python and
// Node clients load.
#include <iostream>

#include "client/encoder_client.h"

int main() {
  std::cout << phasor::kDefaultServiceConfig;
  return std::cout.good() ? 0 : 1;
}
