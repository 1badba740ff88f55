// TLS and mTLS, with the fixtures of data/tls (see data/tls/generate.py).
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace phasor::server::testing {
namespace {

std::string TlsFile(const std::string& name) {
  return absl::StrCat(PHASOR_SERVER_TEST_DATA_DIR, "/tls/", name);
}

std::string Read(const std::string& name) {
  std::ifstream in(TlsFile(name));
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

// ListProfiles over a TLS channel trusting the test CA, presenting the given
// client certificate (none when `client` is empty).
grpc::Status CallOverTls(int port, const std::string& client) {
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = Read("ca.pem");
  if (!client.empty()) {
    ssl.pem_private_key = Read(client + ".key");
    ssl.pem_cert_chain = Read(client + ".pem");
  }
  grpc::ChannelArguments arguments;
  arguments.SetSslTargetNameOverride("localhost");
  auto channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                           grpc::SslCredentials(ssl), arguments);
  auto stub = v1::Encoder::NewStub(channel);
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ListProfilesResponse response;
  return stub->ListProfiles(context.get(), v1::ListProfilesRequest(), &response);
}

TEST(TlsTest, ServerTlsAcceptsTrustingClientsAndRefusesPlaintext) {
  ServerOptions options = TestOptions();
  options.tls_cert_path = TlsFile("server.pem");
  options.tls_key_path = TlsFile("server.key");
  TestServer server = StartTestServer(options);  // Its channel is plaintext.
  ASSERT_NE(server.server, nullptr);
  const grpc::Status tls = CallOverTls(server.server->grpc_port(), "");
  EXPECT_TRUE(tls.ok()) << tls.error_message();
  v1::ListProfilesResponse response;
  EXPECT_FALSE(
      server.stub->ListProfiles(Context().get(), v1::ListProfilesRequest(), &response).ok());
}

TEST(TlsTest, MutualTlsNeedsAClientCertificateFromTheClientCa) {
  ServerOptions options = TestOptions();
  options.tls_cert_path = TlsFile("server.pem");
  options.tls_key_path = TlsFile("server.key");
  options.tls_client_ca_path = TlsFile("ca.pem");
  absl::StatusOr<std::unique_ptr<PhasorServer>> server = PhasorServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->grpc_port();
  const grpc::Status trusted = CallOverTls(port, "client");
  EXPECT_TRUE(trusted.ok()) << trusted.error_message();
  EXPECT_FALSE(CallOverTls(port, "").ok());
  EXPECT_FALSE(CallOverTls(port, "other_client").ok());
}

TEST(TlsTest, HalfConfiguredTlsDoesNotStart) {
  ServerOptions options = TestOptions();
  options.tls_cert_path = TlsFile("server.pem");
  EXPECT_FALSE(PhasorServer::Start(options).ok());
  options = TestOptions();
  options.tls_client_ca_path = TlsFile("ca.pem");
  EXPECT_FALSE(PhasorServer::Start(options).ok());
}

// A key that is not the certificate's is named at startup; gRPC alone only
// reported "cannot listen".
TEST(TlsTest, KeyOfAnotherCertificateIsNamedAtStartup) {
  ServerOptions options = TestOptions();
  options.tls_cert_path = TlsFile("server.pem");
  options.tls_key_path = TlsFile("client.key");
  const absl::StatusOr<std::unique_ptr<PhasorServer>> server = PhasorServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find("is not the private key of the certificate"),
            absl::string_view::npos)
      << server.status();
  EXPECT_NE(server.status().message().find("client.key"), absl::string_view::npos);

  options.tls_key_path = TlsFile("ca.pem");  // A certificate, not a key.
  const absl::StatusOr<std::unique_ptr<PhasorServer>> no_key = PhasorServer::Start(options);
  ASSERT_FALSE(no_key.ok());
  EXPECT_NE(no_key.status().message().find("no unencrypted PEM private key"),
            absl::string_view::npos)
      << no_key.status();
}

}  // namespace
}  // namespace phasor::server::testing
