package detect

// corpus are texts with the matches they hold, for all detectors; near
// misses hold none. TestDetectors checks the spans, and
// TestPatternAgreesWithScanner checks every text against Pattern+Check.
var corpus = []struct {
	name string
	text string
	want []want
}{
	// aws_access_key
	{"aws", "key AKIAIOSFODNN7EXAMPLE here", []want{{4, "AKIAIOSFODNN7EXAMPLE", AWSAccessKey}}},
	{"aws ASIA quoted", `"ASIAY34FZKBOKMUTVV7A"`, []want{{1, "ASIAY34FZKBOKMUTVV7A", AWSAccessKey}}},
	{"aws every prefix", "AGPAAAAAAAAAAAAAAAAA AIDAAAAAAAAAAAAAAAAA AROAAAAAAAAAAAAAAAAA ANPAAAAAAAAAAAAAAAAA ANVAAAAAAAAAAAAAAAAA AIPAAAAAAAAAAAAAAAAA",
		[]want{{0, "AGPAAAAAAAAAAAAAAAAA", AWSAccessKey}, {21, "AIDAAAAAAAAAAAAAAAAA", AWSAccessKey}, {42, "AROAAAAAAAAAAAAAAAAA", AWSAccessKey},
			{63, "ANPAAAAAAAAAAAAAAAAA", AWSAccessKey}, {84, "ANVAAAAAAAAAAAAAAAAA", AWSAccessKey}, {105, "AIPAAAAAAAAAAAAAAAAA", AWSAccessKey}}},
	{"aws near miss: 15 characters", "AKIAIOSFODNN7EXAMPL", nil},
	{"aws near miss: 17 characters", "AKIAIOSFODNN7EXAMPLE7", nil},
	{"aws near miss: inside a word", "xAKIAIOSFODNN7EXAMPLE", nil},
	{"aws near miss: 0, 1, 8 are not base32", "AKIAIOSFODNN0EXAMPLE", nil},
	{"aws near miss: unknown prefix", "AKIBIOSFODNN7EXAMPLE", nil},

	// private_key
	{"private key block", "x\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\ny",
		[]want{{2, "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", PrivateKey}}},
	{"private key unterminated", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk",
		[]want{{0, "-----BEGIN OPENSSH PRIVATE KEY-----", PrivateKey}}},
	{"private key plain label", "-----BEGIN PRIVATE KEY-----MIIE-----END PRIVATE KEY----------BEGIN PRIVATE KEY-----",
		[]want{{0, "-----BEGIN PRIVATE KEY-----MIIE-----END PRIVATE KEY-----", PrivateKey}, {56, "-----BEGIN PRIVATE KEY-----", PrivateKey}}},
	{"private key near miss: public key", "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----", nil},
	{"private key near miss: lower case", "-----begin private key-----", nil},
	{"private key near miss: END alone", "-----END PRIVATE KEY-----", nil},

	// jwt
	{"jwt", "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk rest",
		[]want{{7, "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk", JWT}}},
	{"jwt near miss: two segments", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0", nil},
	{"jwt near miss: inside a word", "xeyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abc", nil},
	{"jwt near miss: empty signature", "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.", nil},

	// github_token
	{"github classic", "token ghp_16C7e42F292c6912E7710c838347Ae178B4a.", []want{{6, "ghp_16C7e42F292c6912E7710c838347Ae178B4a", GitHubToken}}},
	{"github fine-grained", "github_pat_11ABCDEFG0123456789abc_" + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456", []want{{0, "github_pat_11ABCDEFG0123456789abc_" + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456", GitHubToken}}},
	{"github near miss: 35 characters", "ghp_16C7e42F292c6912E7710c838347Ae178B4", nil},
	{"github near miss: unknown kind", "ghx_16C7e42F292c6912E7710c838347Ae178B4a", nil},
	{"github near miss: underscore in a classic token", "ghp_16C7e42F292c6912E7710c838347Ae178B_a", nil},

	// slack_token
	{"slack bot token", "SLACK xoxb-2048-1234567890-AbCdEf.", []want{{6, "xoxb-2048-1234567890-AbCdEf", SlackToken}}},
	{"slack webhook", "post https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX?x",
		[]want{{13, "hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX", SlackToken}}},
	{"slack near miss: short", "xoxb-123456789", nil},
	{"slack near miss: unknown kind", "xoxz-1234567890abcdef", nil},
	{"slack near miss: webhook without a secret", "hooks.slack.com/services/T00000000/B00000000/", nil},

	// generic_api_key
	{"generic json", `{"api_key": "sk_live_4eC39HqLyjWDarjtT1zdp7dc"}`, []want{{13, "sk_live_4eC39HqLyjWDarjtT1zdp7dc", GenericAPIKey}}},
	{"generic env", "export DB_PASSWORD=correcthorsebatterystaple\n", []want{{19, "correcthorsebatterystaple", GenericAPIKey}}},
	{"generic yaml", "client_secret:\t'ZmFrZS1zZWNyZXQtdmFsdWU='", []want{{16, "ZmFrZS1zZWNyZXQtdmFsdWU=", GenericAPIKey}}},
	{"generic any case", "X-Api-Key = abcdefghijklmnop", []want{{12, "abcdefghijklmnop", GenericAPIKey}}},
	{"generic near miss: 15 characters", "token=abcdefghijklmno", nil},
	{"generic near miss: placeholder", "password: ********************", nil},
	{"generic near miss: not a key name", "monkey=abcdefghijklmnopqrstu", nil},
	{"generic near miss: value on the next line", "secret:\n  abcdefghijklmnopqrstu", nil},

	// credit_card
	{"visa grouped", "card 4111 1111 1111 1111 exp", []want{{5, "4111 1111 1111 1111", CreditCard}}},
	{"mastercard dashes", "5555-5555-5555-4444", []want{{0, "5555-5555-5555-4444", CreditCard}}},
	{"mastercard 2-series", "2223003122003222", []want{{0, "2223003122003222", CreditCard}}},
	{"amex 4-6-5", "(3782 822463 10005)", []want{{1, "3782 822463 10005", CreditCard}}},
	{"discover", "6011111111111117", []want{{0, "6011111111111117", CreditCard}}},
	{"jcb", "3530111333300000", []want{{0, "3530111333300000", CreditCard}}},
	{"diners", "30569309025904", []want{{0, "30569309025904", CreditCard}}},
	{"card then card", "4111111111111111 5555555555554444", []want{{0, "4111111111111111", CreditCard}, {17, "5555555555554444", CreditCard}}},
	{"card near miss: Luhn", "4111 1111 1111 1112", nil},
	{"card near miss: unknown issuer", "1234 5678 9012 3452", nil},
	{"card near miss: inside a longer digit run", "94111111111111111", nil},
	{"card near miss: 12 digits", "4111 1111 1118", nil},
	{"card near miss: double space", "4111  1111 1111 1111", nil},

	// email
	{"email", "mail bob.smith+x@mail.example.co.uk.", []want{{5, "bob.smith+x@mail.example.co.uk", Email}}},
	{"email last label with digits", "a@b.example.c0m", []want{{0, "a@b.example", Email}}},
	{"email near miss: no dot", "user@localhost", nil},
	{"email near miss: one-letter TLD", "user@example.c", nil},
	{"email near miss: numeric TLD", "root@127.0.0.1", nil},

	// iban
	{"iban grouped", "IBAN DE89 3704 0044 0532 0130 00.", []want{{5, "DE89 3704 0044 0532 0130 00", IBAN}}},
	{"iban unbroken", "GB82WEST12345698765432", []want{{0, "GB82WEST12345698765432", IBAN}}},
	{"iban groups of 4", "NL91 ABNA 0417 1643 00", []want{{0, "NL91 ABNA 0417 1643 00", IBAN}}},
	{"iban near miss: mod 97", "DE88 3704 0044 0532 0130 00", nil},
	{"iban near miss: unknown country", "ZZ89370400440532013000", nil},
	{"iban near miss: lower case", "de89370400440532013000", nil},

	// us_ssn
	{"ssn", "SSN: 123-45-6789.", []want{{5, "123-45-6789", USSSN}}},
	{"ssn near miss: area 000", "000-12-3456", nil},
	{"ssn near miss: area 666", "666-12-3456", nil},
	{"ssn near miss: area 9xx", "912-12-3456", nil},
	{"ssn near miss: group 00", "123-00-3456", nil},
	{"ssn near miss: serial 0000", "123-45-0000", nil},
	{"ssn near miss: longer run", "1123-45-6789", nil},
	{"ssn near miss: date", "2026-12-02", nil},

	// several, overlapping, adjacent
	{"adjacent", "123-45-6789,4111111111111111;a@b.io", []want{{0, "123-45-6789", USSSN}, {12, "4111111111111111", CreditCard}, {29, "a@b.io", Email}}},
	{"same span: the detector listed first", "password=AKIAIOSFODNN7EXAMPLE", []want{{9, "AKIAIOSFODNN7EXAMPLE", AWSAccessKey}}},
	{"overlap: the earlier start wins", "token=aaaaaaaa4111111111111111", []want{{6, "aaaaaaaa4111111111111111", GenericAPIKey}}},
	{"overlap: the longer wins", "password=4111-1111-1111-1111-x", []want{{9, "4111-1111-1111-1111-x", GenericAPIKey}}},
	{"a failed check consumes", "4111 1111 1111 1112 4111", nil},
	{"a failed check hides a card it overlaps", "1234 4111 1111 1111 1111", nil},

	// unicode and invalid UTF-8
	{"unicode around", "clé: « 4111111111111111 » — żółw a@b.io…", []want{{9, "4111111111111111", CreditCard}, {41, "a@b.io", Email}}},
	{"invalid UTF-8 around", "\xff4111111111111111\xfe", []want{{1, "4111111111111111", CreditCard}}},
	{"invalid UTF-8 inside", "4111\xff1111 1111 1111 a@\xffb.io", nil},
	{"empty", "", nil},
}

type want struct {
	start    int
	text     string
	detector Detector
}
