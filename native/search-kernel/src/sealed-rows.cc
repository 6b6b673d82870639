// The native counterpart of the key ring's AES-256-GCM primitive (platform/keys/sealed-format.ts), and
// the only cipher code in native/: the exact re-rank decrypts only the candidate rows it reads, so it
// cannot go through JavaScript. It calls the OpenSSL that Node itself links and exports (headers under
// node-gyp's include/node/openssl), so no second crypto library is built or loaded. A record is
// byte-for-byte the tail of a sealed blob (nonce | tag | ciphertext): test/sealed-rows.test.ts opens
// records sealed here with the ring's `openBlob`, and records sealed there are opened here.
#include "sealed-rows.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

namespace sealed_rows {

struct RowCipher::State {
  EVP_CIPHER_CTX* enc = nullptr;
  EVP_CIPHER_CTX* dec = nullptr;
};

RowCipher::RowCipher(const uint8_t key[32]) : s_(new State) {
  // The key schedule is set up once per context; each record then only sets its nonce.
  s_->enc = EVP_CIPHER_CTX_new();
  s_->dec = EVP_CIPHER_CTX_new();
  if (!s_->enc || !s_->dec || EVP_EncryptInit_ex(s_->enc, EVP_aes_256_gcm(), nullptr, key, nullptr) != 1 ||
      EVP_DecryptInit_ex(s_->dec, EVP_aes_256_gcm(), nullptr, key, nullptr) != 1) {
    EVP_CIPHER_CTX_free(s_->enc);
    EVP_CIPHER_CTX_free(s_->dec);
    s_->enc = s_->dec = nullptr;
  }
}

RowCipher::~RowCipher() {
  if (s_) {
    EVP_CIPHER_CTX_free(s_->enc);
    EVP_CIPHER_CTX_free(s_->dec);
  }
}

bool RowCipher::Seal(const uint8_t* plain, size_t n, const uint8_t* ad, size_t adn, uint8_t* record) {
  if (!s_->enc) return false;
  uint8_t* nonce = record;
  uint8_t* tag = record + kNonceBytes;
  uint8_t* data = record + kRecordOverhead;
  int len = 0;
  if (RAND_bytes(nonce, static_cast<int>(kNonceBytes)) != 1) return false;
  if (EVP_EncryptInit_ex(s_->enc, nullptr, nullptr, nullptr, nonce) != 1) return false;
  if (adn && EVP_EncryptUpdate(s_->enc, nullptr, &len, ad, static_cast<int>(adn)) != 1) return false;
  if (EVP_EncryptUpdate(s_->enc, data, &len, plain, static_cast<int>(n)) != 1) return false;
  if (EVP_EncryptFinal_ex(s_->enc, data + len, &len) != 1) return false;
  return EVP_CIPHER_CTX_ctrl(s_->enc, EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagBytes), tag) == 1;
}

bool RowCipher::Open(const uint8_t* record, size_t n, const uint8_t* ad, size_t adn, uint8_t* plain) {
  if (!s_->dec) return false;
  int len = 0;
  if (EVP_DecryptInit_ex(s_->dec, nullptr, nullptr, nullptr, record) != 1) return false;
  if (EVP_CIPHER_CTX_ctrl(s_->dec, EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagBytes), const_cast<uint8_t*>(record + kNonceBytes)) != 1) return false;
  if (adn && EVP_DecryptUpdate(s_->dec, nullptr, &len, ad, static_cast<int>(adn)) != 1) return false;
  if (EVP_DecryptUpdate(s_->dec, plain, &len, record + kRecordOverhead, static_cast<int>(n)) != 1) return false;
  return EVP_DecryptFinal_ex(s_->dec, plain + len, &len) == 1;
}

}  // namespace sealed_rows
