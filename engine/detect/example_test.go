package detect_test

import (
	"fmt"

	"github.com/toolgate/toolgate/engine/detect"
)

func Example() {
	s, err := detect.New("aws_access_key", "credit_card", "generic_api_key")
	if err != nil {
		panic(err)
	}
	text := `{"api_key": "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "card": "4111 1111 1111 1111", "id": "AKIAIOSFODNN7EXAMPLE"}`
	for _, m := range s.AppendAll(nil, text) {
		fmt.Printf("%s at %d, %d bytes\n", m.Detector, m.Start, m.End-m.Start)
	}
	_, err = detect.New("aws_access_key", "aws_key")
	fmt.Println(err)
	// Output:
	// generic_api_key at 13, 32 bytes
	// credit_card at 57, 19 bytes
	// aws_access_key at 86, 20 bytes
	// unknown detector "aws_key": known detectors are aws_access_key, private_key, jwt, github_token, slack_token, generic_api_key, credit_card, email, iban, us_ssn
}
