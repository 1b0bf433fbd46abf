// The server's TLS stream (TlsSocket) against Asio's own TLS client on loopback, one event loop:
// large messages both ways (partial writes, records split across reads), a peer's end of stream
// without close_notify read as an end of stream with writing still possible (a half-close), a
// plain-text peer refused at the handshake, and a read ended by closing the socket. Run under
// the sanitizers in CI.
#include "perseus/server/tls_socket.hpp"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <boost/asio/ssl.hpp>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace perseus::server {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

// A server context with a fresh P-256 key and a self-signed certificate for it.
void use_self_signed_certificate(asio::ssl::context& context) {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), EVP_PKEY_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), X509_free);
  ASSERT_TRUE(key && cert);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 3600);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(cert.get()), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get()));
  X509_set_pubkey(cert.get(), key.get());
  ASSERT_GT(X509_sign(cert.get(), key.get(), EVP_sha256()), 0);
  ASSERT_EQ(SSL_CTX_use_certificate(context.native_handle(), cert.get()), 1);
  ASSERT_EQ(SSL_CTX_use_PrivateKey(context.native_handle(), key.get()), 1);
}

class TlsSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    use_self_signed_certificate(server_context);
    prepare_server_context(server_context);
    client_context.set_verify_mode(asio::ssl::verify_none);
    acceptor.open(tcp::v4());
    acceptor.bind({asio::ip::make_address("127.0.0.1"), 0});
    acceptor.listen();
  }

  // A TLS server stream and a connected client socket (not yet shaken hands).
  std::unique_ptr<TlsSocket> accept(tcp::socket& client) {
    client.connect(acceptor.local_endpoint());
    return std::make_unique<TlsSocket>(acceptor.accept(), server_context);
  }

  // Both handshakes, run to completion on the loop.
  std::unique_ptr<TlsSocket> connected(asio::ssl::stream<tcp::socket>& client) {
    auto server = accept(client.next_layer());
    error_code server_ec = asio::error::would_block, client_ec = asio::error::would_block;
    server->async_handshake(asio::ssl::stream_base::server, [&](error_code ec) { server_ec = ec; });
    client.async_handshake(asio::ssl::stream_base::client, [&](error_code ec) { client_ec = ec; });
    io.run();
    io.restart();
    EXPECT_FALSE(server_ec) << server_ec.message();
    EXPECT_FALSE(client_ec) << client_ec.message();
    return server;
  }

  asio::io_context io;
  asio::ssl::context server_context{asio::ssl::context::tls_server};
  asio::ssl::context client_context{asio::ssl::context::tls_client};
  tcp::acceptor acceptor{io};
};

TEST_F(TlsSocketTest, LargeMessagesGoBothWaysIntact) {
  asio::ssl::stream<tcp::socket> client(io, client_context);
  auto server = connected(client);
  std::string sent(300'000, '\0');
  for (std::size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<char>(i * 7919 % 251);
  std::string at_server(sent.size(), '\0'), at_client(sent.size(), '\0');
  error_code last;
  asio::async_write(client, asio::buffer(sent), [&](error_code ec, std::size_t) { last = ec; });
  asio::async_read(*server, asio::buffer(at_server), [&](error_code ec, std::size_t) {
    ASSERT_FALSE(ec) << ec.message();
    asio::async_write(*server, asio::buffer(at_server),
                      [&](error_code ec2, std::size_t) { last = ec2; });
  });
  asio::async_read(client, asio::buffer(at_client),
                   [&](error_code ec, std::size_t) { ASSERT_FALSE(ec) << ec.message(); });
  io.run();
  EXPECT_FALSE(last) << last.message();
  EXPECT_EQ(at_server, sent);
  EXPECT_EQ(at_client, sent);
}

TEST_F(TlsSocketTest, AnEndOfStreamWithoutCloseNotifyReadsAsEofAndTheAnswerStillGoesOut) {
  asio::ssl::stream<tcp::socket> client(io, client_context);
  auto server = connected(client);
  asio::write(client, asio::buffer(std::string("request")));
  client.next_layer().shutdown(tcp::socket::shutdown_send);  // no close_notify
  std::string received(64, '\0'), answer(6, '\0');
  std::size_t got = 0;
  error_code end;
  std::function<void()> read = [&] {
    server->async_read_some(asio::buffer(received.data() + got, received.size() - got),
                            [&](error_code ec, std::size_t n) {
                              got += n;
                              if (!ec) return read();
                              end = ec;
                              asio::async_write(*server, asio::buffer(std::string_view("answer")),
                                                [](error_code, std::size_t) {});
                            });
  };
  read();
  asio::async_read(client, asio::buffer(answer), [](error_code, std::size_t) {});
  io.run();
  EXPECT_EQ(received.substr(0, got), "request");
  EXPECT_EQ(end, asio::error::eof) << end.message();
  EXPECT_EQ(answer, "answer");
}

TEST_F(TlsSocketTest, APlainTextPeerFailsTheHandshake) {
  tcp::socket client(io);
  auto server = accept(client);
  asio::write(client, asio::buffer(std::string("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")));
  error_code result;
  server->async_handshake(asio::ssl::stream_base::server, [&](error_code ec) { result = ec; });
  io.run();
  EXPECT_TRUE(result);
  EXPECT_NE(result, asio::error::would_block);
}

TEST_F(TlsSocketTest, ClosingTheSocketEndsAWaitingRead) {
  asio::ssl::stream<tcp::socket> client(io, client_context);
  auto server = connected(client);
  char byte = 0;
  error_code result;
  server->async_read_some(asio::buffer(&byte, 1), [&](error_code ec, std::size_t) { result = ec; });
  asio::post(io, [&] { server->next_layer().close(); });
  io.run();
  EXPECT_TRUE(result);
}

}  // namespace
}  // namespace perseus::server
