// Package dicomsr writes a generated report as a DICOM Structured Report:
// a Basic Text SR instance (SOP Class 1.2.840.10008.5.1.4.1.1.88.11) in a
// Part 10 file, explicit VR little endian, that PACS and report viewers
// store beside the images it describes.
//
// [New] builds the document from a [memtrans.Report] and the
// [vision.DICOMStudy] of the study (what [memtrans.StudiesFromDICOMDir]
// keeps in Study.DICOM); [Document.WriteTo] writes it.
//
// # What the document holds
//
//   - Patient and General Study modules copied from the source images:
//     PatientName, PatientID, PatientBirthDate, PatientSex,
//     StudyInstanceUID, StudyDate, StudyTime, ReferringPhysicianName,
//     StudyID, AccessionNumber (and StudyDescription when present), so
//     the report files under the same patient and study.
//
//   - A new series (Modality SR) and instance. New UIDs are UUID-derived,
//     under the root 2.25 (ISO/IEC 9834-8; PS3.5 B.2): "2.25." followed by
//     the decimal value of a random (version 4) UUID.
//
//   - SR Document General: CompletionFlag PARTIAL, VerificationFlag
//     UNVERIFIED and PreliminaryFlag PRELIMINARY (a generated report awaits
//     a radiologist), ContentDate/Time the caller's time, and the Current
//     Requested Procedure Evidence Sequence listing the source study, its
//     series and the SOP instances of the views the model read.
//
//   - General Equipment: the model's name as Manufacturer's Model Name,
//     its checksum as Device Serial Number when it fits the attribute's
//     64 characters, and as Software Versions (0018,1020) the model's
//     version, when it has one, then the writer's, "radgen " and
//     radgen.Version (two values of the multi-valued attribute, e.g.
//     "iu-2026-01\radgen 1.0.0"). The File Meta Information's
//     Implementation Version Name is "RADGEN_" and radgen.Version.
//
//   - IHE AI Results' Contributing Equipment Sequence (0018,A001) (SOP
//     Common): one item, purpose (Newcode1, 99IHE, "Processing
//     Algorithm"), the model's manufacturer (DefaultManufacturer when it
//     names none), name as Manufacturer's Model Name, the same Software
//     Versions, the Device UID derived from its checksum, and the time
//     of the contribution. The General Equipment module describes the
//     same device (the writer of the document), not the source's
//     modality: the source's equipment is the images' own.
//
//   - [StudyUIDs] derives the series and instance UIDs from the study and
//     the model instead of drawing them, for a writer that must store a
//     document at most once (a PACS worker retrying or restarted).
//
//   - The content tree of TID 2000 (Basic Diagnostic Imaging Report):
//
//     CONTAINER (18748-4, LN, "Diagnostic Imaging Report")
//     HAS CONCEPT MOD CODE (121049, DCM, "Language of Content Item and Descendants") = (en, RFC5646, "English")
//     HAS OBS CONTEXT CODE (121005, DCM, "Observer Type") = (121007, DCM, "Device")
//     HAS OBS CONTEXT UIDREF (121012, DCM, "Device Observer UID") = UID derived from the model checksum
//     HAS OBS CONTEXT TEXT (121013, DCM, "Device Observer Name") = model name
//     HAS OBS CONTEXT TEXT (121014, DCM, "Device Observer Manufacturer")
//     HAS OBS CONTEXT TEXT (121015, DCM, "Device Observer Model Name") = name and version
//     HAS OBS CONTEXT TEXT (121016, DCM, "Device Observer Serial Number") = checksum
//     CONTAINS CONTAINER (121070, DCM, "Findings")
//     CONTAINS TEXT (121071, DCM, "Finding") = the report text
//     INFERRED FROM IMAGE = each source view (SOP class and instance)
//
// That the report was produced by an AI model and is preliminary is said
// the way DICOM says it: the observer is a Device (TID 1002/1004), not a
// person, and the document is UNVERIFIED and PRELIMINARY.
//
// Text arrives in UTF-8 (as vision.ReadDICOMInfo converts the source
// attributes) and is written in the smallest character set that holds it:
// the default repertoire when all is ASCII, ISO_IR 100 (Latin-1) when that
// suffices, ISO_IR 192 (UTF-8) otherwise.
package dicomsr
