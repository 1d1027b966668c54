// sdfcheck: load an SDF file with SDFormat (libsdformat 12) and describe what the parser made of it.
//
//   sdfcheck [--strict] FILE.sdf
//
// Every parser error goes to stderr, one per line. stdout gets one JSON object:
//   {"sdformat": VERSION, "file": PATH, "sdf_version": (as written), "parsed_as": (converted to),
//    "errors": [...],
//    "worlds": [{"name", "gravity": [x, y, z], "max_step_size", "real_time_factor",
//                "plugins": [PLUGIN], "models": [MODEL]}],
//    "models": [MODEL]}            (models at the top level of a model file)
//   MODEL  = {"name", "static", "pose": POSE (in the world), "plugins": [PLUGIN],
//             "links": [{"name", "pose": POSE (in the model), "mass",
//                        "inertia": [ixx, iyy, izz, ixy, ixz, iyz],
//                        "inertial_pose": POSE (in the link)}],
//             "joints": [{"name", "type", "parent", "child", "pose": POSE (in the model),
//                         "axis": [x, y, z] or null}],
//             "models": [MODEL]}   (nested models)
//   POSE   = [x, y, z, qw, qx, qy, qz]   (m; unit quaternion)
//   PLUGIN = {"name", "filename", "params": {CHILD: TEXT}}
// Poses are resolved through SDFormat's frame graph (SemanticPose), so `relative_to` and the
// default frames of each SDF version are applied by the parser, not by the caller.
// --strict turns parser warnings and unrecognized elements into errors.
// Exit status: 0 without errors, 1 with errors, 2 on a usage error.

#include <sdf/sdf.hh>

#include <cstdio>
#include <iomanip>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace
{
std::string Quote(const std::string &_text)
{
  std::ostringstream out;
  out << '"';
  for (unsigned char c : _text)
  {
    switch (c)
    {
      case '"': out << "\\\""; break;
      case '\\': out << "\\\\"; break;
      case '\n': out << "\\n"; break;
      case '\r': out << "\\r"; break;
      case '\t': out << "\\t"; break;
      default:
        if (c < 0x20)
        {
          char buffer[8];
          std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
          out << buffer;
        }
        else
        {
          out << c;
        }
    }
  }
  out << '"';
  return out.str();
}

std::string Number(double _value)
{
  if (!std::isfinite(_value))
    return "null";
  std::ostringstream out;
  out << std::setprecision(std::numeric_limits<double>::max_digits10) << _value;
  return out.str();
}

std::string Vector(const ignition::math::Vector3d &_v)
{
  return "[" + Number(_v.X()) + ", " + Number(_v.Y()) + ", " + Number(_v.Z()) + "]";
}

std::string Pose(const ignition::math::Pose3d &_pose)
{
  const auto &p = _pose.Pos();
  const auto &q = _pose.Rot();
  return "[" + Number(p.X()) + ", " + Number(p.Y()) + ", " + Number(p.Z()) + ", " +
         Number(q.W()) + ", " + Number(q.X()) + ", " + Number(q.Y()) + ", " +
         Number(q.Z()) + "]";
}

std::string ErrorText(const sdf::Error &_error)
{
  std::ostringstream out;
  out << _error;
  std::string text = out.str();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  return text;
}

// Resolve a semantic pose, recording any resolution failure as an error.
ignition::math::Pose3d Resolve(const sdf::SemanticPose &_pose, const std::string &_to,
                               const std::string &_what, std::vector<std::string> &_errors)
{
  ignition::math::Pose3d pose;
  sdf::Errors errors = _to.empty() ? _pose.Resolve(pose) : _pose.Resolve(pose, _to);
  for (const auto &error : errors)
    _errors.push_back("resolving the pose of " + _what + ": " + ErrorText(error));
  return pose;
}

std::string JointType(sdf::JointType _type)
{
  switch (_type)
  {
    case sdf::JointType::BALL: return "ball";
    case sdf::JointType::CONTINUOUS: return "continuous";
    case sdf::JointType::FIXED: return "fixed";
    case sdf::JointType::GEARBOX: return "gearbox";
    case sdf::JointType::PRISMATIC: return "prismatic";
    case sdf::JointType::REVOLUTE: return "revolute";
    case sdf::JointType::REVOLUTE2: return "revolute2";
    case sdf::JointType::SCREW: return "screw";
    case sdf::JointType::UNIVERSAL: return "universal";
    default: return "invalid";
  }
}

// The <plugin> children of an element: name, filename and the text of each parameter.
std::string Plugins(const sdf::ElementPtr &_parent)
{
  std::ostringstream out;
  out << "[";
  if (_parent && _parent->HasElement("plugin"))
  {
    bool first = true;
    for (auto plugin = _parent->GetElement("plugin"); plugin;
         plugin = plugin->GetNextElement("plugin"))
    {
      out << (first ? "" : ", ") << "{\"name\": "
          << Quote(plugin->Get<std::string>("name")) << ", \"filename\": "
          << Quote(plugin->Get<std::string>("filename")) << ", \"params\": {";
      bool firstParam = true;
      for (auto child = plugin->GetFirstElement(); child; child = child->GetNextElement())
      {
        std::string value = child->GetValue() ? child->GetValue()->GetAsString() : "";
        out << (firstParam ? "" : ", ") << Quote(child->GetName()) << ": " << Quote(value);
        firstParam = false;
      }
      out << "}}";
      first = false;
    }
  }
  out << "]";
  return out.str();
}

std::string Model(const sdf::Model &_model, std::vector<std::string> &_errors)
{
  std::ostringstream out;
  const std::string scope = "model '" + _model.Name() + "'";
  out << "{\"name\": " << Quote(_model.Name())
      << ", \"static\": " << (_model.Static() ? "true" : "false")
      << ", \"pose\": " << Pose(Resolve(_model.SemanticPose(), "", scope, _errors))
      << ", \"plugins\": " << Plugins(_model.Element()) << ", \"links\": [";
  for (uint64_t i = 0; i < _model.LinkCount(); ++i)
  {
    const sdf::Link *link = _model.LinkByIndex(i);
    const auto &inertial = link->Inertial();
    const auto &mass = inertial.MassMatrix();
    const auto diagonal = mass.DiagonalMoments();
    const auto off = mass.OffDiagonalMoments();
    out << (i ? ", " : "") << "{\"name\": " << Quote(link->Name()) << ", \"pose\": "
        << Pose(Resolve(link->SemanticPose(), "__model__",
                        "link '" + link->Name() + "' in " + scope, _errors))
        << ", \"mass\": " << Number(mass.Mass()) << ", \"inertia\": [" << Number(diagonal.X())
        << ", " << Number(diagonal.Y()) << ", " << Number(diagonal.Z()) << ", "
        << Number(off.X()) << ", " << Number(off.Y()) << ", " << Number(off.Z())
        << "], \"inertial_pose\": " << Pose(inertial.Pose()) << "}";
  }
  out << "], \"joints\": [";
  for (uint64_t i = 0; i < _model.JointCount(); ++i)
  {
    const sdf::Joint *joint = _model.JointByIndex(i);
    const sdf::JointAxis *axis = joint->Axis(0);
    out << (i ? ", " : "") << "{\"name\": " << Quote(joint->Name())
        << ", \"type\": " << Quote(JointType(joint->Type()))
        << ", \"parent\": " << Quote(joint->ParentLinkName())
        << ", \"child\": " << Quote(joint->ChildLinkName()) << ", \"pose\": "
        << Pose(Resolve(joint->SemanticPose(), "__model__",
                        "joint '" + joint->Name() + "' in " + scope, _errors))
        << ", \"axis\": " << (axis ? Vector(axis->Xyz()) : std::string("null")) << "}";
  }
  out << "], \"models\": [";
  for (uint64_t i = 0; i < _model.ModelCount(); ++i)
    out << (i ? ", " : "") << Model(*_model.ModelByIndex(i), _errors);
  out << "]}";
  return out.str();
}

std::string World(const sdf::World &_world, std::vector<std::string> &_errors)
{
  std::ostringstream out;
  const sdf::Physics *physics = _world.PhysicsDefault();
  out << "{\"name\": " << Quote(_world.Name()) << ", \"gravity\": " << Vector(_world.Gravity())
      << ", \"max_step_size\": " << Number(physics ? physics->MaxStepSize() : NAN)
      << ", \"real_time_factor\": " << Number(physics ? physics->RealTimeFactor() : NAN)
      << ", \"plugins\": " << Plugins(_world.Element()) << ", \"models\": [";
  for (uint64_t i = 0; i < _world.ModelCount(); ++i)
    out << (i ? ", " : "") << Model(*_world.ModelByIndex(i), _errors);
  out << "]}";
  return out.str();
}
}  // namespace

int main(int argc, char **argv)
{
  bool strict = false;
  std::string path;
  for (int i = 1; i < argc; ++i)
  {
    std::string arg = argv[i];
    if (arg == "--strict")
      strict = true;
    else if (path.empty() && !arg.empty() && arg[0] != '-')
      path = arg;
    else
    {
      std::cerr << "sdfcheck: unexpected argument '" << arg
                << "'; usage: sdfcheck [--strict] FILE.sdf\n";
      return 2;
    }
  }
  if (path.empty())
  {
    std::cerr << "sdfcheck: no file given; usage: sdfcheck [--strict] FILE.sdf\n";
    return 2;
  }

  sdf::ParserConfig config = sdf::ParserConfig::GlobalConfig();
  if (strict)
  {
    config.SetWarningsPolicy(sdf::EnforcementPolicy::ERR);
    config.SetUnrecognizedElementsPolicy(sdf::EnforcementPolicy::ERR);
  }
  sdf::Root root;
  std::vector<std::string> errors;
  for (const auto &error : root.Load(path, config))
    errors.push_back(ErrorText(error));

  std::ostringstream body;
  body << "\"worlds\": [";
  for (uint64_t i = 0; i < root.WorldCount(); ++i)
    body << (i ? ", " : "") << World(*root.WorldByIndex(i), errors);
  body << "], \"models\": [";
  if (root.Model())
    body << Model(*root.Model(), errors);
  body << "]";

  for (const auto &error : errors)
    std::cerr << "sdfcheck: error: " << error << "\n";
  std::cout << "{\"sdformat\": " << Quote(SDF_VERSION_FULL) << ", \"file\": " << Quote(path)
            << ", \"sdf_version\": "
            << Quote(root.Element() ? root.Element()->OriginalVersion() : std::string())
            << ", \"parsed_as\": " << Quote(root.Version()) << ", \"errors\": [";
  for (size_t i = 0; i < errors.size(); ++i)
    std::cout << (i ? ", " : "") << Quote(errors[i]);
  std::cout << "], " << body.str() << "}\n";
  return errors.empty() ? 0 : 1;
}
