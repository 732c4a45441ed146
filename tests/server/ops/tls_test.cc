// TLS and mutual TLS, with certificates made by the openssl CLI at test time
// (a CA, a server certificate for 127.0.0.1/localhost, a client certificate).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tests/server/server_test_util.h"

namespace gemma::server::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(::testing::TempDir() + "/gemma_tls_" + std::to_string(getpid()));
    const std::string script =
        "set -e; mkdir -p " + *dir_ + "; cd " + *dir_ +
        "\n"
        "key() { openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "-keyout $1.key -out $1.csr -subj /CN=$2 2>/dev/null; }\n"
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "-keyout ca.key -out ca.pem -days 2 -subj /CN=gemma-test-ca 2>/dev/null\n"
        "key server localhost; key client gemma-client\n"
        "echo 'subjectAltName=DNS:localhost,IP:127.0.0.1' > server.ext\n"
        "echo 'extendedKeyUsage=clientAuth' > client.ext\n"
        "for n in server client; do openssl x509 -req -in $n.csr -CA ca.pem -CAkey ca.key "
        "-CAcreateserial -out $n.pem -days 2 -extfile $n.ext 2>/dev/null; done\n";
    int exit_code = -1;
    const std::string output = RunCommand({"/bin/sh", "-c", script}, &exit_code);
    ASSERT_EQ(exit_code, 0) << output;
  }
  static void TearDownTestSuite() {
    int exit_code = 0;
    RunCommand({"rm", "-rf", *dir_}, &exit_code);
    delete dir_;
  }
  static std::string File(const std::string& name) { return *dir_ + "/" + name; }

  static grpc::Status Info(const std::string& address,
                           std::shared_ptr<grpc::ChannelCredentials> credentials) {
    auto stub = v1::Gemma::NewStub(grpc::CreateChannel(address, credentials));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ModelInfo info;
    return stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info);
  }
  static std::shared_ptr<grpc::ChannelCredentials> Tls(bool with_client_cert) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadAll(File("ca.pem"));
    if (with_client_cert) {
      ssl.pem_cert_chain = ReadAll(File("client.pem"));
      ssl.pem_private_key = ReadAll(File("client.key"));
    }
    return grpc::SslCredentials(ssl);
  }

  static std::string* dir_;
};
std::string* TlsTest::dir_ = nullptr;

TEST_F(TlsTest, TlsServesTlsClientsOnly) {
  ServerOptions options = TestServerOptions();
  options.ops.tls = {File("server.pem"), File("server.key"), ""};
  auto server = StartTestServer(options);
  ASSERT_NE(server, nullptr);
  const std::string address = "127.0.0.1:" + std::to_string(server->port());
  const grpc::Status tls = Info(address, Tls(false));
  EXPECT_TRUE(tls.ok()) << tls.error_message();
  EXPECT_FALSE(Info(address, grpc::InsecureChannelCredentials()).ok());
  // Generate over TLS too.
  auto stub = v1::Gemma::NewStub(grpc::CreateChannel(address, Tls(false)));
  EXPECT_TRUE(RunStream(*stub, GreedyText("Love is", 4)).status.ok());
}

TEST_F(TlsTest, MutualTlsRequiresAClientCertificate) {
  ServerOptions options = TestServerOptions();
  options.ops.tls = {File("server.pem"), File("server.key"), File("ca.pem")};
  auto server = StartTestServer(options);
  ASSERT_NE(server, nullptr);
  const std::string address = "127.0.0.1:" + std::to_string(server->port());
  EXPECT_FALSE(Info(address, Tls(false)).ok());
  EXPECT_FALSE(Info(address, grpc::InsecureChannelCredentials()).ok());
  const grpc::Status mutual = Info(address, Tls(true));
  EXPECT_TRUE(mutual.ok()) << mutual.error_message();
}

TEST_F(TlsTest, BadFilesAreRefusedNamingTheFlag) {
  ServerOptions options = TestServerOptions();
  options.ops.tls = {File("missing.pem"), File("server.key"), ""};
  absl::StatusOr<std::unique_ptr<GemmaServer>> server = GemmaServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("--tls-cert"), std::string::npos) << server.status();
  options.ops.tls = {File("server.pem"), File("server.ext"), ""};
  server = GemmaServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("--tls-key"), std::string::npos) << server.status();
}

}  // namespace
}  // namespace gemma::server::testing
