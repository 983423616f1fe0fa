// Package hl7 carries a generated report to a RIS or EHR as an HL7
// version 2 message: an ORU^R01 (unsolicited observation result) in the
// traditional ER7 encoding (pipes and hats), sent over MLLP, the framing
// every interface engine (Mirth, Rhapsody, Cloverleaf) and RIS listens
// with.
//
// [NewORU] writes the message (HL7 v2.5.1):
//
//	MSH  sending application RADGEN, message type ORU^R01^ORU_R01, a
//	     control ID derived from the study and the model ([ControlID]), so
//	     a message sent again after a crash carries the same ID and a
//	     receiver can drop the copy
//	PID  the patient's ID, name, birth date and sex from the DICOM header
//	ORC  RE (observations to follow), the accession number as filler order
//	OBR  the accession number (OBR-3 and OBR-18), the procedure as
//	     18748-4^Diagnostic Imaging Report^LN, the study's date and time,
//	     result status P (preliminary: the report awaits a radiologist)
//	ZDS  the Study Instance UID, as IHE Radiology's Scheduled Workflow
//	     carries it
//	OBX  the report, one TX segment per line, coded
//	     18782-3^Radiology Study observation (narrative)^LN, status P, the
//	     model as producer (OBX-15) and as equipment (OBX-18, with its
//	     device UID); then the Study Instance UID as an ST observation
//	     (110180^Study Instance UID^DCM) for receivers that ignore ZDS
//
// Text is escaped as ER7 requires (\F\ \S\ \T\ \R\ \E\); a message with
// characters outside ASCII declares UNICODE UTF-8 in MSH-18.
//
// [Sender] sends a message over MLLP (a 0x0B byte, the message, 0x1C
// 0x0D) and waits for the acknowledgement: AA or CA is success; AE, AR,
// CE or CR is a [*NAKError]. As HL7 v2.5 §2.9 has it, AE and CE say the
// message's content is in error (final), AR and CR that it was rejected
// for reasons unrelated to its content, such as the receiving system
// being down (the error wraps [ErrRejected]: send it again later). A
// connection that cannot be made, breaks or times out is an error
// wrapping [ErrUnavailable], which may pass. An answer that is not an
// acknowledgement of the message sent, or a frame longer than
// MaxAckBytes, is [ErrMalformed].
// [ParseMessage], [ReadFrame] and [NewACK] serve the other side (a test
// listener, a small receiver); all of them bound what they read.
package hl7
